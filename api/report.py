"""Render a sweep summary (workers/results/summary.py SweepSummary) as Markdown, a self-contained HTML page, or JSON.

The HTML page has inline CSS and inline SVG (api/report_svg.py) and loads nothing from the network.
Every string that can come from a fixture, a model or a spec is escaped. A simulated sweep carries a
large SIMULATED banner; an unfinished one is labelled interim.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape

from afpbench.api import report_svg
from afpbench.scoring.measures import MEANS
from afpbench.scoring.rates import EXCLUDED, FAIL, PASS, UNFINISHED, RateBlock
from afpbench.workers.results.summary import SweepSummary

CSS = """
body{font-family:system-ui,sans-serif;margin:24px auto;max-width:1150px;color:#222;line-height:1.4}
table{border-collapse:collapse;margin:8px 0 20px;font-size:13px}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}
th{background:#f3f3f3} td.l,th.l{text-align:left}
.banner{font-size:40px;font-weight:800;text-align:center;padding:18px;margin:10px 0;border:4px solid}
.sim{background:#fff3cd;color:#7a4b00;border-color:#e0a800}
.interim{font-size:22px;background:#e3f2fd;color:#0d47a1;border-color:#64b5f6}
.muted{color:#666;font-size:12px} figure{margin:10px 0 24px} figcaption{font-size:12px;color:#555}
"""


def render_report(summary: SweepSummary, fmt: str = "md") -> str:
    if fmt == "json":
        return json.dumps(summary.model_dump(mode="json"), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    if fmt == "md":
        return _markdown(summary)
    if fmt == "html":
        return _html(summary)
    raise ValueError(f"unknown report format {fmt!r}; use md, html or json")


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def _ci(ci: Sequence[float] | None) -> str:
    return "-" if not ci else f"{ci[0]:.1%} to {ci[1]:.1%}"


def _num(x: float | None, places: int = 2) -> str:
    return "-" if x is None else f"{x:.{places}f}"


def _rate_cells(r: RateBlock) -> list[str]:
    """pass/n, pass rate, exact interval (the failure reading is placed by the caller)."""
    return [f"{r.passed}/{r.n}", _pct(r.pass_rate), _ci(r.pass_rate_ci95)]


def _beside(r: RateBlock) -> list[str]:
    """Every state outside the denominator, then the unfinished cells."""
    return [*[str(r.excluded[s]) for s in EXCLUDED], str(r.unfinished)]


def _rate_rows(summary: SweepSummary) -> list[list[str]]:
    return [[r.model, r.condition, *_rate_cells(r), r.failures, *_beside(r)] for r in summary.by_model_condition]


RATE_HEAD = ["model", "condition", "pass/n", "pass rate", "95% CI (exact)", "failures", *EXCLUDED, "unfinished"]


def _sections(summary: SweepSummary) -> list[tuple[str, list[str], list[list[str]], str]]:
    """(heading, header, rows, note) for every table, shared by Markdown and HTML."""
    s = summary
    fixture_rows = [[f"{r.fixture_id}@{r.fixture_version}" + (" (high risk)" if r.high_risk else ""),
                     r.condition, *_rate_cells(r), *_beside(r)] for r in s.by_fixture_condition]
    dims = [[r.condition, *[_num(getattr(r, d)) for d in MEANS], str(r.n_scored)]
            for r in s.dimensions.by_condition]
    fatal = s.fatal_by_criterion
    fatal_rows = [[c, k, str(n)] for c, per in fatal.by_condition.items() for k, n in per.items()]
    fatal_rows += [[c, "(no fatal: below the pass rule)", str(n)] for c, n in fatal.fail_without_fatal.items()]
    tokens = [[r.condition, _num(r.mean_output_tokens, 1), str(r.n)] for r in s.output_tokens.by_condition]
    tokens += [[f"{r.model} / {r.condition}", _num(r.mean_output_tokens, 1), str(r.n)]
               for r in s.output_tokens.by_model_condition]
    comparisons = [[r.model, r.comparison, r.status, r.reading] for r in s.comparisons]
    cost = [[r.model, str(r.attempts), *[str(n) for n in (r.tokens.input, r.tokens.output, r.tokens.cached,
                                                           r.tokens.reasoning)],
             "-" if r.usd is None else f"${r.usd:.4f}"] for r in s.cost.by_model]
    cost.append(["whole sweep", "", "", "", "", "", f"${s.cost.sweep_usd:.4f}"])
    hr = s.high_risk
    hr_rows = [[x.model, x.fixture, x.condition, str(x.finished_repeats)] for x in hr.lacking]
    hr_note = ("every high-risk fixture has the required finished repeats" if hr.ready else
               f"{hr.lacking_count} model x fixture x condition groups lack {hr.required_repeats} repeats")
    balance = s.exclusion_balance
    share_rows = [[r.model, r.condition, str(r.finished), str(r.scored), f"{r.excluded} ({_pct(r.excluded_share)})",
                   *[_pct(r.share_by_state[st]) for st in EXCLUDED]] for r in balance.shares]
    balance_rows = [[t.model, t.comparison, f"{t.first_excluded}/{t.first_excluded + t.first_scored}",
                     f"{t.second_excluded}/{t.second_excluded + t.second_scored}",
                     "-" if t.p_value is None else f"{t.p_value:.4g}", "FLAGGED" if t.flagged else "ok"]
                    for t in balance.comparisons]
    decisions = [[str(d.cell_id), d.model, d.condition, f"{d.fixture} r{d.repeat}",
                  f"{d.from_state or '-'} -> {d.to_state}", "override" if d.override else "dispute",
                  d.reviewer, d.reason or "-", d.decided_at or "-"] for d in s.human_decisions]
    decisions_note = (f"{len(decisions)} human decisions set the state of these cells (an override changed a "
                      "judged verdict and needed a reason); the sealed inputs are unchanged"
                      if decisions else "no human decisions")
    written = [[str(w.cell_id), w.model, w.condition, f"{w.fixture} r{w.repeat}", ", ".join(w.tools),
                "yes" if w.whole_answer else "no", w.state or "-"] for w in s.written_tool_calls]
    return [
        ("Pass rate by model and condition", RATE_HEAD, _rate_rows(s),
         "pass rate = MODEL_PASS / (MODEL_PASS + MODEL_FAIL); every other state is counted beside it"),
        ("Pass rate by fixture and condition (all models)",
         ["fixture", "condition", "pass/n", "pass rate", "95% CI (exact)", *EXCLUDED, "unfinished"], fixture_rows, ""),
        ("Comparisons (paired, same model, fixture and repeat)", ["model", "comparison", "status", "reading"],
         comparisons, "exact McNemar test on discordant pairs; difference with Newcombe's paired interval"),
        ("Mean rubric score by condition (scored cells)", ["condition", *MEANS, "n"], dims,
         "each dimension 0-2, total 0-8"),
        ("Fatal failures by criterion", ["condition", "criterion", "count"], fatal_rows, ""),
        ("Mean output tokens of the scored answer", ["condition", "mean output tokens", "n"], tokens,
         "shows whether a condition only adds length"),
        ("Cost", ["model", "attempts", "input", "output", "cached", "reasoning", "USD"], cost, s.cost.rule),
        ("High-risk fixtures", ["model", "fixture", "condition", "finished repeats"], hr_rows, hr_note),
        ("Exclusion balance: excluded share of finished cells by model and condition",
         ["model", "condition", "finished", "scored", "excluded", *EXCLUDED], share_rows,
         "a state outside PASS/(PASS+FAIL) that depends on the condition biases the pass-rate comparison"),
        ("Exclusion balance: comparisons", ["model", "comparison", "first excluded", "second excluded",
                                             "p (Fisher exact)", "flag"], balance_rows, balance.test),
        ("Human decisions", ["cell", "model", "condition", "fixture", "from -> to", "kind", "reviewer", "reason",
                             "decided at (UTC)"], decisions, decisions_note),
        ("Tool calls written as text", ["cell", "model", "condition", "fixture", "tools", "whole answer", "state"],
         written, "the answer carried a tool call as text instead of making it: never executed, scored as text"
         if written else "no answer wrote a tool call as text"),
    ]


def _interim(s: SweepSummary) -> bool:
    return s.interim or not s.complete


def _standing(s: SweepSummary) -> str:
    """What the figures are: interim, final, or nothing measured (never "final" with no scored cell)."""
    if s.no_scored_cell:
        return "NOTHING MEASURED (no cell scored)"
    return "INTERIM (sweep not complete)" if _interim(s) else "final"


def _headline(s: SweepSummary) -> list[str]:
    lines = [f"sweep {s.sweep_id} | status {s.status} | {_standing(s)} | cells {s.cells} "
             f"(unfinished {s.unfinished}) | seal {s.seal_hash} | computed {s.computed_at}"]
    if s.no_scored_cell:
        lines.insert(0, s.no_scored_cell.upper()[:1] + s.no_scored_cell[1:])
    rule = s.pass_rule or {}
    if rule:
        lines.append(f"pass rule (sealed): no fatal criterion, every dimension >= {rule.get('min_dimension')}, "
                     f"total >= {rule.get('min_total')}")
    if s.simulated:
        lines.insert(0, f"SIMULATED: this sweep used the simulated provider ({', '.join(s.simulated_parts)}); "
                        "its numbers say nothing about any real model.")
    flagged = [t for t in s.exclusion_balance.comparisons if t.flagged]
    if flagged:
        lines.append("exclusion balance: " + "; ".join(f"{t.model} {t.comparison} flagged (p = {t.p_value:.3g})"
                                                       for t in flagged)
                     + ": read these pass-rate comparisons with care")
    if s.human_decisions:
        lines.append(f"human decisions: {len(s.human_decisions)} "
                     f"({sum(d.override for d in s.human_decisions)} overrides), listed below")
    lines += [f"notice: {n}" for n in s.notices]
    return lines


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _markdown(s: SweepSummary) -> str:
    out = [f"# afpbench report: {_md_cell(s.name)}", ""]
    loud = ("SIMULATED", "No cell was scored")
    out += [f"> **{_md_cell(line)}**" if line.startswith(loud) else f"> {_md_cell(line)}"
            for line in _headline(s)]
    for heading, header, rows, note in _sections(s):
        out += ["", f"## {heading}", ""]
        if note:
            out += [f"_{_md_cell(note)}_", ""]
        out.append("| " + " | ".join(_md_cell(h) for h in header) + " |")
        out.append("|" + "---|" * len(header))
        out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(out) + "\n"


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    def cells(tag: str, values: list[str]) -> str:
        return "".join(f'<{tag}{" class=l" if i == 0 or not _numeric(v) else ""}>{escape(str(v))}</{tag}>'
                       for i, v in enumerate(values))

    body = "".join(f"<tr>{cells('td', r)}</tr>" for r in rows)
    return f"<table><thead><tr>{cells('th', header)}</tr></thead><tbody>{body}</tbody></table>"


def _numeric(v: str) -> bool:
    return str(v).replace(".", "", 1).replace("%", "").replace("/", "").replace("$", "").replace("-", "").isdigit()


def _plots(s: SweepSummary) -> list[tuple[str, str]]:
    multi = len(s.models) > 1
    whiskers = [((f"{r.model}/" if multi else "") + r.condition, r.pass_rate, r.pass_rate_ci95, r.n)
                for r in s.by_model_condition]
    fixtures = sorted({f"{r.fixture_id}@{r.fixture_version}" for r in s.by_fixture_condition})
    heat = {(f"{r.fixture_id}@{r.fixture_version}", r.condition): (r.pass_rate, f"{r.passed}/{r.n}")
            for r in s.by_fixture_condition}
    groups = [((f"{r.model} / " if multi else "") + r.condition,
               {PASS: r.passed, FAIL: r.failed, **r.excluded, UNFINISHED: r.unfinished})
              for r in s.by_model_condition]
    tokens = [(r.condition, r.mean_output_tokens) for r in s.output_tokens.by_condition]
    return [
        ("Pass rate by condition with exact 95% interval",
         report_svg.pass_rate_whiskers(whiskers, "pass rate by condition")),
        ("Pass rate by fixture and condition (cell text: pass/n; grey: nothing scored)",
         report_svg.heat_map(fixtures, s.conditions, heat, "fixture by condition heat map")),
        ("Result states by condition (every state shown)", report_svg.stacked_states(groups, "state breakdown")),
        ("Mean output tokens by condition", report_svg.value_bars(tokens, "mean output tokens", " tokens")),
    ]


def _html(s: SweepSummary) -> str:
    parts = [f"<h1>afpbench report: {escape(s.name)}</h1>"]
    if s.simulated:
        parts.append('<div class="banner sim" id="simulated-banner">SIMULATED</div>')
    if s.no_scored_cell:
        parts.append(f'<div class="banner interim" id="nothing-scored">{escape(_standing(s))}</div>')
    elif _interim(s):
        parts.append('<div class="banner interim">INTERIM: the sweep is not complete</div>')
    parts += [f'<p class="muted">{escape(line)}</p>' for line in _headline(s)]
    plots = _plots(s)
    if s.no_scored_cell:  # no rate to chart: only the state breakdown says anything
        plots = [p for p in plots if p[0].startswith("Result states")]
    for caption, svg in plots:
        parts.append(f"<figure>{svg}<figcaption>{escape(caption)}</figcaption></figure>")
    for heading, header, rows, note in _sections(s):
        parts.append(f"<h2>{escape(heading)}</h2>")
        if note:
            parts.append(f'<p class="muted">{escape(note)}</p>')
        parts.append(_html_table(header, rows))
    title = ("SIMULATED - " if s.simulated else "") + f"afpbench report: {s.name}"
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
            f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
            + "\n".join(parts) + "</body></html>\n")
