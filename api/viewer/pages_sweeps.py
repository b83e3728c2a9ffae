"""Viewer pages of sweeps: the list, one sweep (report plots, forest plot of the paired comparisons,
exclusion balance, filtered cells) and the small JSON the page polls for live progress."""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any, Literal, get_args

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy import case, func
from sqlmodel import Session, col, select

from afpbench.api import report
from afpbench.api.http.report_cache import ReportCache, etag_matches
from afpbench.api.viewer import html as v
from afpbench.api.viewer.auth import PageError, Viewer
from afpbench.api.viewer.cells_query import latest_results
from afpbench.api.viewer.chrome import logout_form
from afpbench.api.viewer.forest import forest_plot
from afpbench.api.viewer.result_tables import results_table
from afpbench.api.viewer.routing import ViewerRoute
from afpbench.reference.protocol_facts import CONDITIONS
from afpbench.workers import runs
from afpbench.workers.results import tables
from afpbench.workers.results.batch_listing import batch_states
from afpbench.workers.results.reliability_tables import RELIABILITY_TABLES
from afpbench.workers.results.spend import spend_lines
from afpbench.workers.results.summary import PairedComparison, PendingComparison, SweepSummary
from afpbench.workers.results.table_spec import condition_legend
from afpbench.workers.results.trail_tables import HUMAN_DECISIONS, RERUNS
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Cell, Phase, Sweep, saved_id
from afpbench.workers.sweeps.progress import Progress

router = APIRouter(route_class=ViewerRoute, dependencies=Viewer)
CELL_ROWS = 500
REPORT_CSP = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'"
StateFilter = Literal["MODEL_PASS", "MODEL_FAIL", "PROVIDER_BLOCK", "INFRA_ERROR", "INVALID_TEST",
                      "GRADER_DISPUTE", "UNFINISHED"]


def _one_of(field: str, value: str | None, allowed: tuple[str, ...]) -> str | None:
    if not value:
        return None
    if value not in allowed:
        raise PageError(422, f"{field}: {value!r} is not one of {', '.join(allowed)}")
    return value


def sweep_or_404(session: Session, sweep_id: str) -> Sweep:
    row = session.get(Sweep, sweep_id)
    if row is None:
        raise PageError(404, f"no sweep with id {sweep_id!r}")
    return row


def _models(sweep: Sweep) -> list[str]:
    return [str(m.get("label") or m.get("model")) for m in sweep.spec.get("models", [])]


@router.get("/")
def sweeps_list(request: Request):
    done = func.sum(case((col(Cell.phase) == Phase.done, 1), else_=0))
    with session_scope() as session:
        counts = {sid: (total, finished or 0) for sid, total, finished in session.execute(
            select(Cell.sweep_id, func.count(), done).group_by(Cell.sweep_id)).all()}
        sweeps = list(session.exec(select(Sweep).order_by(col(Sweep.created_at).desc(), Sweep.id).limit(200)))
    rows: list[list[v.Cell]] = []
    for s in sweeps:
        total, finished = counts.get(s.id, (0, 0))
        name = v.join([v.link(v.url(f"/sweeps/{v.seg(s.id)}"), s.name), " ", v.simulated_badge() if s.simulated
                       else ""])
        rows.append([v.Safe(f'<code>{v.e(s.id)}</code>'), name, ", ".join(_models(s)), s.status,
                     f"{finished}/{total}", v.Safe(f'<code title="{v.e(s.seal_hash)}">{v.e(s.seal_hash[:12])}</code>'),
                     s.created_at.strftime("%Y-%m-%d %H:%M")])
    body = [v.table(["id", "name", "model(s)", "state", "progress", "seal", "created (UTC)"], rows, tid="sweeps")
            if rows else v.para("no sweeps yet: `afpbench run` or POST /sweeps starts one", "muted")]
    return v.page("Sweeps", body, logout=logout_form(request))


def _reports(request: Request) -> ReportCache:
    return request.app.state.report_cache


def _comparisons(s: SweepSummary) -> v.Safe:
    paired = [c for c in s.comparisons if isinstance(c, PairedComparison)]
    plot = (v.Safe(f"<figure>{forest_plot(paired, len(s.models) > 1)}<figcaption>paired on model, fixture and "
                   "repeat; difference in percentage points with Newcombe's interval; green: first condition "
                   "better, red: worse, blue: the interval includes zero</figcaption></figure>")
            if paired else v.para(_why_no_pairs(s), "muted"))
    return v.join([plot, results_table(tables.COMPARISONS.render(s))])


def _why_no_pairs(s: SweepSummary) -> str:
    if not s.comparisons:
        return "one condition ran: nothing to compare"
    if all(isinstance(c, PendingComparison) for c in s.comparisons):
        return f"paired comparisons: {s.comparisons[0].reading}"
    return "no comparison has matched pairs yet: no fixture and repeat is scored under both of its conditions"


def _balance(s: SweepSummary) -> v.Safe:
    return v.join([results_table(tables.EXCLUSION_SHARES.render(s), titled=True),
                   results_table(tables.EXCLUSION_TESTS.render(s), titled=True)])


def _options(name: str, label: str, choices: list[tuple[str, str]], chosen: str | None) -> str:
    opts = "".join(f'<option value="{v.e(val)}"{" selected" if val == chosen else ""}>{v.e(text)}</option>'
                   for val, text in [("", f"any {label}"), *choices])
    return f'<label>{v.e(label)} <select name="{v.e(name)}" data-autosubmit>{opts}</select></label>'


def _cells(session: Session, s: SweepSummary, sweep_id: str, flt: dict[str, str | None]) -> v.Safe:
    where: list[Any] = [Cell.sweep_id == sweep_id]
    if flt["model"]:
        where.append(Cell.model_hash == flt["model"])
    if flt["condition"]:
        where.append(Cell.condition == flt["condition"])
    if flt["fixture"]:
        where.append(Cell.fixture_id == flt["fixture"])
    if flt["state"] == "UNFINISHED":
        where.append(Cell.phase != Phase.done)
    elif flt["state"]:
        where.append(Cell.state == flt["state"])
    total = session.exec(select(func.count()).select_from(Cell).where(*where)).one()
    cells = list(session.exec(select(Cell).where(*where).order_by(col(Cell.id)).limit(CELL_ROWS)))
    results = latest_results(session, [saved_id(c.id) for c in cells])
    fixtures = sorted({f for (f,) in session.execute(select(Cell.fixture_id).where(Cell.sweep_id == sweep_id)
                                                     .distinct()).all()})
    form = ('<form method="get" class="filters" id="filters">'
            + _options("model", "model", [(m.model_hash, m.model) for m in s.models], flt["model"])
            + _options("condition", "condition", [(c, c) for c in s.conditions], flt["condition"])
            + _options("fixture", "fixture", [(f, f) for f in fixtures], flt["fixture"])
            + _options("state", "state", [(x, x) for x in get_args(StateFilter)], flt["state"])
            + '<button type="submit">filter</button></form>')
    rows: list[list[v.Cell]] = []
    for c in cells:
        r = results.get(saved_id(c.id))
        compare = v.url(f"/sweeps/{v.seg(sweep_id)}/fixtures/{v.seg(c.fixture_id)}", model=c.model_hash,
                        repeat=c.repeat)
        decided: dict[str, Any] = (r.details or {}) if r is not None else {}  # stored JSON, as written
        state = v.state_badge(c.state, c.phase)
        if decided.get("source") == "human":  # a reviewer's name is data: escaped
            state = v.join([state, v.e(f" human: {decided.get('reviewer')}")])
        rows.append([v.link(v.url(f"/cells/{c.id}"), c.id), c.model_label, c.condition,
                     f"{c.fixture_id}@{c.fixture_version}", c.repeat, state,
                     "-" if r is None or r.total is None else r.total, (r.fatal_criterion if r else None) or "-",
                     v.link(compare, "A-D side by side")])
    shown = f"{len(cells)} of {total} cells" + (f" (the first {CELL_ROWS})" if total > CELL_ROWS else "")
    return v.join([v.Safe(form), v.para(shown, "muted"),
                   v.table(["cell", "model", "condition", "fixture", "repeat", "state", "total", "fatal", ""], rows,
                           tid="cells")])


def _progress_line(p: Progress) -> str:
    """The progress text of the sweep page, also sent in progress.json for the page's live update."""
    states = ", ".join(f"{k} {n}" for k, n in sorted(p.states.items())) or "none yet"
    return f"{p.done}/{p.total} cells decided; {p.stages.line()}; status {p.status}; states: {states}"


def _progress_block(sweep_id: str) -> v.Safe:
    p = runs.progress(sweep_id)
    live = "" if p.finished else f' data-progress="{v.e(v.url(f"/sweeps/{v.seg(sweep_id)}/progress.json"))}"'
    return v.Safe(f'<div class="progress" id="progress"{live}><progress max="{p.total}" value="{p.done}"></progress> '
                  f'<span id="progress-text">{v.e(_progress_line(p))}</span></div>')


@router.get("/sweeps/{sweep_id}")
def sweep_page(
    request: Request, sweep_id: str,
    model: Annotated[str | None, Query(max_length=64)] = None,
    condition: Annotated[str | None, Query(max_length=8)] = None,
    fixture: Annotated[str | None, Query(max_length=80)] = None,
    state: Annotated[str | None, Query(max_length=32)] = None,
):
    with session_scope() as session:
        name = sweep_or_404(session, sweep_id).name
    # An empty value is "any" (the filter form sends every select); anything else must be known.
    flt = {"model": model or None, "condition": _one_of("condition", condition, CONDITIONS),
           "fixture": fixture or None, "state": _one_of("state", state, get_args(StateFilter))}
    s = _reports(request).summary(sweep_id)
    head = [f"sweep {s.sweep_id}", f"status {s.status}", "INTERIM (not complete)" if s.interim or not s.complete
            else "final", f"cells {s.cells}", f"seal {s.seal_hash}"]
    plots = "".join(f"<figure>{svg}<figcaption>{v.e(cap)}</figcaption></figure>" for cap, svg in report._plots(s))
    progress = _progress_block(sweep_id)
    with session_scope() as session:
        cells = _cells(session, s, sweep_id, flt)
    body = [
        v.para(" | ".join(head), "muted"), progress,
        *[v.para(n, "notice") for n in s.notices],
        *[v.para(line, "muted") for line in spend_lines(s.cost, s.budget)],
        v.para(v.link(v.url(f"/sweeps/{v.seg(sweep_id)}/report"), "the full report (every table)"), "muted"),
        v.para(condition_legend(s.conditions), "muted"),
        v.section(tables.RATES.title, results_table(tables.RATES.render(s)), sid="rates-section"),
        v.section(tables.COMPARISONS.title, _comparisons(s), sid="forest-section"),
        v.section("Plots", v.Safe(plots)),
        v.section("Exclusion balance", _balance(s), sid="balance-section"),
        *([v.section(RERUNS.title, results_table(RERUNS.render(s)), sid="reruns-section")] if s.reruns else []),
        v.section(HUMAN_DECISIONS.title, results_table(HUMAN_DECISIONS.render(s)), sid="decisions-section"),
        *([v.section(tables.BATCHES.title, results_table(tables.BATCHES.render(batches)), sid="batches-section")]
          if (batches := batch_states(sweep_id)) else []),
        v.section("Judge reliability", v.join([results_table(t.render(s), titled=True) for t in RELIABILITY_TABLES]),
                  sid="reliability-section"),
        v.section("Cells", cells, sid="cells-section"),
    ]
    return v.page(name, body, crumbs=[(v.url(f"/sweeps/{v.seg(sweep_id)}"), sweep_id)],
                  logout=logout_form(request), simulated=s.simulated)


@router.get("/sweeps/{sweep_id}/report")
def sweep_report(request: Request, sweep_id: str) -> Response:
    """The report's own self-contained HTML page (api/report.py), with the report's policy: inline style only;
    a finished sweep's from the report cache, with its ETag."""
    rendered = _reports(request).rendered(sweep_id, "html")
    headers = {**v.SECURITY_HEADERS, "Content-Security-Policy": REPORT_CSP, "Cache-Control": "private, no-cache",
               **({"ETag": rendered.etag} if rendered.etag else {})}
    if etag_matches(request.headers.get("if-none-match"), rendered.etag):
        return Response(status_code=304, headers=headers)
    return HTMLResponse(rendered.body, headers=headers)


@router.get("/sweeps/{sweep_id}/progress.json")
def sweep_progress(request: Request, sweep_id: str) -> Response:
    """What the sweep page polls (api/viewer/static/viewer.js) every 2 s while the sweep runs and its tab is
    shown. Revalidated by ETag: an unchanged progress costs its one counting query and a 304, no body."""
    p = runs.progress(sweep_id)  # an unknown sweep: SweepNotFound, a 404 page
    body = json.dumps({"status": p.status, "total": p.total, "done": p.done, "finished": p.finished,
                       "states": p.states, "stages": p.stages.__dict__, "line": _progress_line(p)}, sort_keys=True)
    etag = '"p-' + hashlib.sha256(body.encode()).hexdigest()[:24] + '"'
    headers = {"Cache-Control": "no-cache", "ETag": etag}
    if etag_matches(request.headers.get("if-none-match"), etag):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)
