"""The sections of a cell page, rendered from its RunRecord (workers/results/record_model.py)."""

from __future__ import annotations

import json
from typing import Any

from afpbench.api.viewer import html as v
from afpbench.api.viewer.highlight import mark_quotes
from afpbench.reference.protocol_facts import DIMENSIONS
from afpbench.scoring.written_tool_call import WrittenToolCalls
from afpbench.workers.results.record_model import AttemptEntry, JudgementEntry, RunRecord


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def latest_judgements(r: RunRecord) -> list[JudgementEntry]:
    run = r.results[-1].scoring_run if r.results else None
    return [j for j in r.judgements if j.scoring_run == run]


def flagged_quotes(judgements: list[JudgementEntry]) -> list[str]:
    """The quotes of every flagged fatal criterion in these judgements."""
    out = []
    for j in judgements:
        parsed = j.parsed or {}
        flags, quotes = parsed.get("fatal_flags") or {}, parsed.get("quotes") or {}
        if isinstance(flags, dict) and isinstance(quotes, dict):
            out += [str(quotes[c]) for c, flag in flags.items() if flag and quotes.get(c)]
    return out


def fatal_flags(r: RunRecord) -> list[str]:
    """Every fatal reading of the latest scoring: the verdict's, each judge's flags, each proposal."""
    latest = r.results[-1] if r.results else None
    out = [f"verdict: {r.fatal_criterion}"] if r.fatal_criterion else []
    for j in latest_judgements(r):
        flags = (j.parsed or {}).get("fatal_flags") or {}
        if isinstance(flags, dict):
            out += [f"{j.judge} (round {j.round}): {c}" for c, flag in flags.items() if flag]
    details: dict[str, Any] = latest.details if latest else {}  # stored JSON, read as the scorer wrote it
    for item in details.get("proposed_fatal") or []:
        if isinstance(item, list) and len(item) == 2:
            out.append(f"{item[0]}: {item[1]}")
    return out


def overview(r: RunRecord) -> v.Safe:
    sim = r.simulated
    rows: list[tuple[str, v.Cell]] = [
        ("cell", r.cell_key), ("model", f"{r.model} ({r.model_name or '-'}, hash {r.model_hash})"),
        ("provider", r.provider), ("served model", r.served_model_version or "-"),
        ("condition", f"{r.condition} (instructions {r.instruction_version.version or '-'}, "
                      f"sha256 {r.instruction_version.sha256 or '-'})"),
        ("fixture", f"{r.fixture_id}@{r.fixture_version}" + (" (high risk)" if r.high_risk else "")),
        ("repeat", r.repeat), ("state", v.state_badge(r.result_state)), ("reason", r.state_reason or "-"),
        ("total score", "-" if r.component_scores_and_rationale.total is None else
         f"{r.component_scores_and_rationale.total} / 8"),
        ("fatal flags", "; ".join(fatal_flags(r)) or "none"),
        ("tool call written as text", written.describe() if (written := WrittenToolCalls.from_record(
            r.written_tool_call)) else "none"),
        ("executed at (UTC)", r.executed_at or "-"),
        ("tokens", f"input {r.tokens.input}, output {r.tokens.output}, cached {r.tokens.cached}, "
                   f"reasoning {r.tokens.reasoning}"),
        ("latency", "-" if r.latency.ms is None else f"{r.latency.ms:.0f} ms"),
        ("graders", ", ".join(r.grader_model) or "none"), ("seal", r.seal_hash or "-"),
        ("simulated", f"model output {sim.model_output}, grading {sim.grading}, sweep {sim.sweep}"),
    ]
    return v.table(["field", "value"], rows, "kv", tid="overview")


def answer(r: RunRecord) -> v.Safe:
    quotes = flagged_quotes(latest_judgements(r))
    note = (f"{len(quotes)} judge quote(s) for flagged fatal criteria are highlighted" if quotes
            else "no judge flagged a fatal criterion with a quote")
    return v.join([v.para(note, "muted"), mark_quotes(r.raw_output.text, quotes)])


def scores(r: RunRecord) -> v.Safe:
    c = r.component_scores_and_rationale
    judges = c.judge_rationales
    head = ["dimension", "verdict", *[f"{j.judge} r{j.round}" for j in judges]]
    rows = []
    for d in DIMENSIONS:
        cells: list[v.Cell] = [d, "-" if not c.scores or c.scores.get(d) is None else c.scores[d]]
        for j in judges:
            score = j.scores.get(d) if isinstance(j.scores, dict) else None
            why = j.rationales.get(d) if isinstance(j.rationales, dict) else None
            cells.append(f"{score if score is not None else '-'}: {why or ''}")
        rows.append(cells)
    return v.join([v.para(f"verdict rationale: {c.rationale or '-'}"), v.table(head, rows, tid="scores")])


def judgements(r: RunRecord) -> v.Safe:
    rows: list[list[v.Cell]] = []
    for j in r.judgements:
        parsed: dict[str, Any] = j.parsed or {}  # stored JSON, read as the judge parser wrote it
        flags = parsed.get("fatal_flags") or {}
        quotes = parsed.get("quotes") or {}
        flagged = "; ".join(f"{k}: {quotes.get(k) or '(no quote)'}" for k, f in flags.items() if f) \
            if isinstance(flags, dict) and isinstance(quotes, dict) else ""
        rows.append([j.scoring_run, j.judge, j.order, parsed.get("total", "-"), flagged or "none",
                     j.parse_error or "-", v.details("raw judge output", v.pre(j.raw_text))])
    return v.table(["scoring run", "judge", "order", "total", "fatal flags (quote)", "parse error", "raw"], rows,
                   tid="judgements")


def provenance(r: RunRecord) -> v.Safe:
    details: dict[str, Any] = r.results[-1].details if r.results else {}  # stored JSON, as the scorer wrote it
    parts: list[v.Cell] = []
    prov = details.get("provenance") if isinstance(details.get("provenance"), dict) else None
    if prov:
        figures = [[f.get("text"), f.get("value"), f.get("step"), f.get("matched") or "-",
                    ", ".join(f.get("findings") or []) or "-", "; ".join(f.get("notes") or []) or "-",
                    "yes" if f.get("is_answer") else ""] for f in prov.get("figures") or [] if isinstance(f, dict)]
        parts.append(v.table(["figure", "value", "rung", "matched", "findings", "notes", "answer"], figures,
                             tid="provenance"))
        calls = [[c.get("index"), c.get("expression"), c.get("status"), c.get("result"), c.get("reason") or "-"]
                 for c in prov.get("calls") or [] if isinstance(c, dict)]
        if calls:
            parts.append(v.table(["call", "expression", "status", "result", "reason"], calls))
    else:
        parts.append(v.para("no provenance trace (not a numeric fixture, or not scored)", "muted"))
    asserts = [[a.get("id"), a.get("kind"), "passed" if a.get("passed") else "FAILED", a.get("detail")]
               for a in details.get("assertions") or [] if isinstance(a, dict)]
    if asserts:
        parts.append(v.table(["assertion", "kind", "outcome", "detail"], asserts, tid="assertions"))
    return v.join(v.h(p) for p in parts)


def tool_calls(r: RunRecord) -> v.Safe:
    if not r.tool_calls:
        return v.para("no tool calls", "muted")
    calls: list[dict[str, Any]] = r.tool_calls  # stored JSON, as execution recorded each call
    rows = [[c.get("round"), c.get("name"), c.get("expression", "-"), c.get("result", "-"), c.get("arguments_raw")]
            for c in calls]
    return v.table(["round", "tool", "expression", "result", "arguments as sent"], rows, tid="tool-calls")


def _round(i: int, rnd: dict[str, Any], r: RunRecord, a: AttemptEntry) -> v.Safe:
    body = rnd.get("raw_body")
    if a.id == r.raw_output.attempt_id and i < len(r.raw_output.raw_bodies):
        body = r.raw_output.raw_bodies[i]  # the scored attempt's bodies sit in raw_output
    rest = {k: x for k, x in rnd.items() if k not in ("raw_body", "request")}
    return v.details(f"round {i + 1}: HTTP {rnd.get('http_status', rnd.get('status', '-'))}", v.join([
        v.para("request as sent (no secrets)"), v.pre(_json(rnd.get("request"))),
        v.para("status and kept headers"), v.pre(_json(rest)), v.para("raw body"), v.pre(body)]))


def attempts(r: RunRecord) -> v.Safe:
    parts = []
    for a in r.attempts:
        head = (f"attempt {a.number}: {a.outcome}, HTTP {a.http_status or '-'}, "
                f"{'-' if a.latency_ms is None else f'{a.latency_ms:.0f} ms'}"
                + (" (scored)" if a.id == r.raw_output.attempt_id else "") + (" SIMULATED" if a.simulated else "")
                + (f" SUPERSEDED by {a.superseded}" if a.superseded else ""))
        rows = [("worker", a.worker or "-"), ("started / finished", f"{a.started_at} / {a.finished_at}"),
                ("error", a.error or "-"), ("finish reason", a.finish_reason or "-"),
                ("served model", a.served_model or "-"), ("request id", a.provider_request_id or "-"),
                ("tokens", f"in {a.tokens.input}, out {a.tokens.output}")]
        inner = [v.table(["field", "value"], rows, "kv"), v.para("output text"), v.pre(a.output_text),
                 *[_round(i, rnd, r, a) for i, rnd in enumerate(a.rounds)]]
        parts.append(v.details(head, v.join(inner), open_=a.id == r.raw_output.attempt_id))
    return v.join(parts) if parts else v.para("no attempt yet", "muted")


def history(r: RunRecord) -> v.Safe:
    results = [[x.scoring_run, v.state_badge(x.state), x.total if x.total is not None else "-",
                x.fatal_criterion or "-", str(x.details.get("source", "scorer")), x.rationale or "-", x.created_at,
                x.superseded or "-"] for x in r.results]
    decisions = [[d.reviewer, f"{d.from_state or '-'} -> {d.state}", "override" if d.override else "dispute",
                  d.reason or "-", d.note or "-", _json(d.scores) if d.scores else "-", d.created_at]
                 for d in r.human_review_outcome or []]
    return v.join([
        v.table(["scoring run", "state", "total", "fatal", "source", "rationale", "at (UTC)", "superseded by"], results,
                tid="results"),
        v.Safe("<h3>Human decisions</h3>"),
        v.table(["reviewer", "from -> to", "kind", "reason", "note", "scores", "at (UTC)"], decisions,
                tid="decisions") if decisions else v.para("no human decision", "muted"),
    ])
