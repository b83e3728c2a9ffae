"""Render a sweep summary (workers/results/summary.py SweepSummary) as Markdown, a self-contained HTML page, or JSON.

The tables are workers/results/tables.py's REPORT_TABLES, laid out here for md and html, and added to the
JSON as rows of text; this module holds the headline, the plots and the page around them.

The HTML page has inline CSS and inline SVG (api/report_svg.py) and loads nothing from the network.
Every string that can come from a fixture, a model or a spec is escaped. A simulated sweep carries a
large SIMULATED banner; an unfinished one is labelled interim.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from afpbench.api import report_svg
from afpbench.scoring.rates import FAIL, PASS, UNFINISHED
from afpbench.workers.results.spend import spend_lines
from afpbench.workers.results.summary import SweepSummary
from afpbench.workers.results.table_spec import RenderedTable, condition_legend
from afpbench.workers.results.table_text import markdown, md_cell
from afpbench.workers.results.tables import REPORT_TABLES

CSS = """
body{font-family:system-ui,sans-serif;margin:24px auto;max-width:1150px;color:#222;line-height:1.4}
table{border-collapse:collapse;margin:8px 0 20px;font-size:13px}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:left}
th{background:#f3f3f3} td.n,th.n{text-align:right}
.banner{font-size:40px;font-weight:800;text-align:center;padding:18px;margin:10px 0;border:4px solid}
.sim{background:#fff3cd;color:#7a4b00;border-color:#e0a800}
.interim{font-size:22px;background:#e3f2fd;color:#0d47a1;border-color:#64b5f6}
.muted{color:#666;font-size:12px} figure{margin:10px 0 24px} figcaption{font-size:12px;color:#555}
"""


def render_report(summary: SweepSummary, fmt: str = "md") -> str:
    if fmt == "json":
        return json.dumps(report_json(summary), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    if fmt == "md":
        return _markdown(summary)
    if fmt == "html":
        return _html(summary)
    raise ValueError(f"unknown report format {fmt!r}; use md, html or json")


def report_json(summary: SweepSummary) -> dict[str, Any]:
    """The summary's own JSON, and under "tables" every report table's rows as the md and html show them
    (api/http/schemas.py SweepReport)."""
    tables = [t.render(summary).keyed().model_dump(mode="json") for t in REPORT_TABLES]
    return {**summary.model_dump(mode="json"), "tables": tables}


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
    lines.append(condition_legend(s.conditions))
    lines += spend_lines(s.cost, s.budget)
    lines += [f"notice: {n}" for n in s.notices]
    return lines


def _markdown(s: SweepSummary) -> str:
    out = [f"# afpbench report: {md_cell(s.name)}", ""]
    loud = ("SIMULATED", "No cell was scored")
    out += [f"> **{md_cell(line)}**" if line.startswith(loud) else f"> {md_cell(line)}"
            for line in _headline(s)]
    for table in REPORT_TABLES:
        out += ["", *markdown(table.render(s))]
    return "\n".join(out) + "\n"


def _html_table(table: RenderedTable) -> str:
    """Numbers right-aligned (class n), text left; every cell escaped."""
    def cells(tag: str, values: list[str]) -> str:
        return "".join(f'<{tag}{" class=n" if head.numeric else ""}>{escape(value)}</{tag}>'
                       for head, value in zip(table.columns, values, strict=True))

    body = "".join(f"<tr>{cells('td', r)}</tr>" for r in table.rows)
    head = cells("th", [c.header for c in table.columns])
    return f'<table id="{escape(table.id)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


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
    for table in REPORT_TABLES:
        rendered = table.render(s)
        parts.append(f"<h2>{escape(rendered.title)}</h2>")
        if rendered.note:
            parts.append(f'<p class="muted">{escape(rendered.note)}</p>')
        parts.append(_html_table(rendered))
    title = ("SIMULATED - " if s.simulated else "") + f"afpbench report: {s.name}"
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
            f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
            + "\n".join(parts) + "</body></html>\n")
