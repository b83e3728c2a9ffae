"""Viewer pages of cells: one fixture's four conditions side by side, one cell's full run record, and
the human decision on a disputed cell (through workers/grading/adjudication.record_human_decision)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import RedirectResponse
from sqlmodel import Session, select

from afpbench.api.http.deps import DB_INT_MAX
from afpbench.api.viewer import html as v
from afpbench.api.viewer import record_view as rv
from afpbench.api.viewer.auth import Form, PageError, Viewer, check_csrf
from afpbench.api.viewer.chrome import csrf_field, logout_form
from afpbench.api.viewer.highlight import mark_quotes
from afpbench.api.viewer.pages_sweeps import sweep_or_404
from afpbench.api.viewer.routing import ViewerRoute
from afpbench.fixtures.schema import FatalCriterionId
from afpbench.reference.protocol_facts import CONDITIONS, DIMENSIONS
from afpbench.scoring.states import ResultState
from afpbench.workers.grading import adjudication
from afpbench.workers.results.records import run_record
from afpbench.workers.results.table_spec import condition_legend
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Cell, saved_id

router = APIRouter(route_class=ViewerRoute, dependencies=Viewer)
CellId = Annotated[int, Path(ge=1, le=DB_INT_MAX)]


def _choice_links(label: str, options: list[tuple[str, str]], chosen: str, make) -> str:
    items = [f"<strong>{v.e(text)}</strong>" if val == chosen else v.link(make(val), text) for val, text in options]
    return f'<p class="choices">{v.e(label)}: ' + " ".join(items) + "</p>"


@router.get("/sweeps/{sweep_id}/fixtures/{fixture_id}")
def compare_page(
    request: Request, sweep_id: str, fixture_id: Annotated[str, Path(max_length=80)],
    model: Annotated[str | None, Query(max_length=64, description="model hash")] = None,
    repeat: Annotated[int, Query(ge=1, le=1000)] = 1,
):
    """The same fixture and repeat under A-D for one model: only the instruction differs."""
    with session_scope() as session:
        return _compare_page(session, request, sweep_id, fixture_id, model, repeat)


def _compare_page(session: Session, request: Request, sweep_id: str, fixture_id: str, model: str | None,
                  repeat: int):
    sweep = sweep_or_404(session, sweep_id)
    cells = list(session.exec(select(Cell).where(Cell.sweep_id == sweep_id, Cell.fixture_id == fixture_id)))
    if not cells:
        raise PageError(404, f"sweep {sweep_id} has no cell of fixture {fixture_id!r}")
    models = {c.model_hash: c.model_label for c in cells}
    chosen = model or sorted(models, key=lambda h: models[h])[0]
    if chosen not in models:
        raise PageError(404, f"model {chosen!r} has no cell of fixture {fixture_id!r} in sweep {sweep_id}")
    repeats = sorted({c.repeat for c in cells if c.model_hash == chosen})
    if repeat not in repeats:
        raise PageError(404, f"repeat {repeat} of fixture {fixture_id!r} does not exist (repeats: "
                             f"{', '.join(map(str, repeats))})")
    here = v.url(f"/sweeps/{v.seg(sweep_id)}/fixtures/{v.seg(fixture_id)}")
    by_condition = {c.condition: c for c in cells if c.model_hash == chosen and c.repeat == repeat}
    columns = []
    for cond in CONDITIONS:
        cell = by_condition.get(cond)
        if cell is None:
            columns.append(f'<div class="column" data-condition="{cond}"><h2>{cond}</h2>'
                           '<p class="muted">not in this sweep</p></div>')
            continue
        r = run_record(session, saved_id(cell.id))
        total = r.component_scores_and_rationale.total
        flags = rv.fatal_flags(r)
        columns.append(
            f'<div class="column" data-condition="{cond}"><h2>{cond} '
            + v.link(v.url(f"/cells/{cell.id}"), f"cell {cell.id}") + "</h2>"
            + f'<p class="state">{v.state_badge(r.result_state, cell.phase)}</p>'
            + f'<p class="total">total score: {v.e("-" if total is None else f"{total} / 8")}</p>'
            + f'<p class="fatal">fatal: {v.e("; ".join(flags) or "none")}</p>'
            + mark_quotes(r.raw_output.text, rv.flagged_quotes(rv.latest_judgements(r))) + "</div>")
    body = [
        v.para(f"fixture {fixture_id}, repeat {repeat}, model {models[chosen]}: the same task and evidence under "
               "each condition; only the system instruction differs", "muted"),
        v.para(condition_legend(CONDITIONS), "muted"),
        v.Safe(_choice_links("model", sorted(models.items(), key=lambda kv: kv[1]), chosen,
                             lambda h: f"{here}?model={v.seg(h)}&repeat=1")),
        v.Safe(_choice_links("repeat", [(str(n), str(n)) for n in repeats], str(repeat),
                             lambda n: f"{here}?model={v.seg(chosen)}&repeat={n}")),
        v.Safe('<div class="side-by-side" id="side-by-side">' + "".join(columns) + "</div>"),
    ]
    crumbs = [(v.url(f"/sweeps/{v.seg(sweep_id)}"), sweep_id), (here, f"{fixture_id} A-D")]
    return v.page(f"{fixture_id} under A, B, C, D", body, crumbs=crumbs, logout=logout_form(request),
                  simulated=sweep.simulated)


def _decision_form(request: Request, cell_id: int, typed: dict[str, str] | None = None,
                   refused: str | None = None) -> v.Safe:
    """The decision form; after a refusal, filled with what was typed and the reason above it."""
    typed = typed or {}

    def options(values: list[str], chosen: str, blank: str | None = None) -> str:
        pairs = ([("", blank)] if blank is not None else []) + [(x, x) for x in values]
        return "".join(f'<option value="{v.e(val)}"{" selected" if val == chosen else ""}>{v.e(text)}</option>'
                       for val, text in pairs)

    states = [s.value for s in ResultState if s != ResultState.GRADER_DISPUTE]
    scores = "".join(f'<label>{v.e(d)} <select name="score_{v.e(d)}">'
                     f'{options(["0", "1", "2"], typed.get(f"score_{d}", ""), "-")}</select></label>'
                     for d in DIMENSIONS)
    fatal = options([c.value for c in FatalCriterionId], typed.get("fatal_criterion", ""), "none")
    error = f'<p class="error" id="decision-refused" role="alert">{v.e(refused)}</p>' if refused else ""
    return v.Safe(
        error + f'<form method="post" action="{v.url(f"/cells/{cell_id}/decide")}" id="decide" class="decide">'
        + csrf_field(request)
        + '<label>reviewer <input name="reviewer" required maxlength="200" '
        + f'value="{v.e(typed.get("reviewer", ""))}"></label>'
        + f'<label>decision <select name="state">{options(states, typed.get("state", ""))}</select></label>'
        + f'<fieldset><legend>scores (all four, or none)</legend>{scores}</fieldset>'
        + f'<label>fatal criterion <select name="fatal_criterion">{fatal}</select></label>'
        + '<label>note <textarea name="note" required maxlength="20000" rows="3">'
        + v.e(typed.get("note", "")) + "</textarea></label>"
        + '<button type="submit">record decision</button></form>')


@router.get("/cells/{cell_id}")
def cell_page(request: Request, cell_id: CellId):
    return _cell_page(request, cell_id)


def _cell_page(request: Request, cell_id: int, typed: dict[str, str] | None = None, refused: str | None = None):
    with session_scope() as session:
        if session.get(Cell, cell_id) is None:
            raise PageError(404, f"no cell with id {cell_id}")
        r = run_record(session, cell_id)
    body = [
        v.section("Run record", rv.overview(r), sid="record"),
        v.section("Answer", rv.answer(r), sid="answer"),
        v.section("Scores and rationale", rv.scores(r), sid="scores-section"),
        v.section("Judgements", rv.judgements(r), sid="judgements-section"),
        v.section("Provenance and assertions", rv.provenance(r), sid="provenance-section"),
        v.section("Tool calls", rv.tool_calls(r), sid="tools-section"),
        v.section("Attempts and HTTP rounds", rv.attempts(r), sid="attempts-section"),
        v.section("Results and human decisions", rv.history(r), sid="history-section"),
    ]
    if r.result_state == ResultState.GRADER_DISPUTE.value:  # below the answer it decides on
        body.insert(2, v.section("Decide this dispute", v.para("a human decision adds rows (nothing is overwritten) "
                                                                "and must agree with the sealed pass rule", "muted"),
                                 _decision_form(request, cell_id, typed, refused), sid="adjudicate"))
    compare = v.url(f"/sweeps/{v.seg(r.sweep_id)}/fixtures/{v.seg(r.fixture_id)}", model=r.model_hash,
                    repeat=r.repeat)
    crumbs = [(v.url(f"/sweeps/{v.seg(r.sweep_id)}"), r.sweep_id), (compare, f"{r.fixture_id} A-D"),
              (v.url(f"/cells/{cell_id}"), f"cell {cell_id}")]
    # After a refused decision: the page again with what was typed kept, answered 422.
    return v.page(f"Cell {cell_id}: {r.model} / {r.condition} / {r.fixture_id} r{r.repeat}", body, crumbs=crumbs,
                  logout=logout_form(request), simulated=r.simulated.sweep or r.simulated.model_output,
                  status_code=422 if refused else 200)


def _decision_fields(form: dict[str, str]) -> dict:
    """The form as decide()'s arguments; one line naming the field that is wrong."""
    reviewer, note = form.get("reviewer", "").strip(), form.get("note", "").strip()
    if not reviewer or len(reviewer) > 200:
        raise PageError(422, "reviewer: give a name of 1 to 200 characters")
    if not note or len(note) > 20_000:
        raise PageError(422, "note: give a note of 1 to 20000 characters")
    given = {d: form.get(f"score_{d}", "") for d in DIMENSIONS}
    scores = None
    if any(given.values()):
        missing = [d for d, x in given.items() if x not in ("0", "1", "2")]
        if missing:
            raise PageError(422, f"scores.{missing[0]}: give 0, 1 or 2 for every dimension, or no score at all")
        scores = {d: int(x) for d, x in given.items()}
    fatal = form.get("fatal_criterion") or None
    if fatal is not None and fatal not in {c.value for c in FatalCriterionId}:
        raise PageError(422, f"fatal_criterion: {fatal[:60]!r} is not a fatal criterion")
    return {"reviewer": reviewer, "state": form.get("state", ""), "note": note, "scores": scores,
            "fatal_criterion": fatal}


@router.post("/cells/{cell_id}/decide")
def decide(request: Request, cell_id: CellId, form: Form):
    check_csrf(request, form)
    with session_scope() as session:  # closed before decide() writes in its own transaction
        if session.get(Cell, cell_id) is None:
            raise PageError(404, f"no cell with id {cell_id}")
    try:
        adjudication.record_human_decision(cell_id, **_decision_fields(form))
    except PageError as exc:  # a field is wrong: the form comes back as typed, with the reason
        return _cell_page(request, cell_id, form, f"decision refused: {exc}")
    except adjudication.AdjudicationError as exc:
        return _cell_page(request, cell_id, form, f"decision refused: {exc}")
    return RedirectResponse(v.url(f"/cells/{cell_id}") + "#history-section", status_code=303)
