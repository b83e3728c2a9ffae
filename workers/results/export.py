"""The publication bundle of a sweep, and the gate that decides whether it may read "published".

The protocol lists seven items a published result must contain (reference/protocol.yaml,
publication_items). The bundle writes each; STATUS.md reads "published" only when all seven are
present and non-empty AND the sweep is complete (every cell finished, no comparison pending);
otherwise it reads the protocol's pending status and lists what is missing.

The bundle is written into a temporary sibling directory and renamed into place, so a failure leaves
nothing half-written; an existing non-empty directory is never touched.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy import and_, select
from sqlmodel import Session, col

from afpbench.fixtures.loader import FixtureFile
from afpbench.reference.loader import protocol
from afpbench.reference.protocol_facts import DIMENSIONS
from afpbench.scoring.rates import EXCLUDED
from afpbench.workers.errors import ExportError, SweepNotFound
from afpbench.workers.redact import mask_known
from afpbench.workers.results.aggregation import snapshot
from afpbench.workers.results.records import known_secret_values, records_jsonl
from afpbench.workers.results.summary import HumanDecisionEntry, SweepSummary
from afpbench.workers.results.summary_queries import is_latest_result
from afpbench.workers.results.table_spec import condition_legend
from afpbench.workers.results.table_text import csv_text, markdown, table_csv
from afpbench.workers.results.tables import REPORT_TABLES
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Cell, Result, Sweep
from afpbench.workers.sweeps.stored_fixtures import stored_files

PUBLISHED = "published"
JUDGE_PROMPT_FILE = "judge_prompt.md"  # the grader prompt, once; every run record names it and its hash
# Which files carry each publication item (all must exist and be non-empty).
ITEM_FILES = {
    "fixtures": ["fixtures/"],
    "instructions": ["instructions/"],
    "rubric": ["rubric_and_fatal_criteria.yaml", JUDGE_PROMPT_FILE],
    "raw_outputs": ["raw_outputs.jsonl"],
    "scores": ["scores.csv"],
    "excluded": ["excluded.csv"],
    "summary": ["summary.json", "summary.md", "tables/", "LIMITATIONS.md"],
}
Renderer = Callable[[SweepSummary, str], str]


@dataclass
class BundleReport:
    directory: Path
    status: str
    missing: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    simulated: bool = False

    @property
    def published(self) -> bool:
        return self.status == PUBLISHED


def export_bundle(sweep_id: str, directory: str | Path, renderer: Renderer | None = None) -> BundleReport:
    """Write the bundle; `renderer(summary, fmt)` (api.report.render_report) adds summary.md and report.html."""
    target = Path(directory)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ExportError(f"{target}: already exists and is not an empty directory; choose a new one")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.partial-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        report = _write(sweep_id, tmp, renderer)
        if target.exists():
            target.rmdir()  # empty (checked above); rename needs the name free
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    report.directory = target
    return report


def _write(sweep_id: str, root: Path, renderer: Renderer | None) -> BundleReport:
    summary = snapshot(sweep_id, interim=None)
    with session_scope() as session:
        sweep = session.get(Sweep, sweep_id)
        if sweep is None:
            raise SweepNotFound(f"no sweep with id {sweep_id!r}")
        secrets = known_secret_values(sweep)
        inputs = sweep.inputs or {}
        _write_fixtures(root, stored_files(session, sweep_id).files())
        _write_instructions(root, (inputs.get("instructions") or {}), sweep.seal_components)
        _text(root / "rubric_and_fatal_criteria.yaml", _rubric_yaml(sweep))
        if inputs.get("judge_prompt"):
            _text(root / JUDGE_PROMPT_FILE, inputs["judge_prompt"])
        with (root / "raw_outputs.jsonl").open("w", encoding="utf-8") as out:
            for line in records_jsonl(session, sweep_id, judge_prompt_file=JUDGE_PROMPT_FILE):
                out.write(line + "\n")
        _text(root / "scores.csv", mask_known(_scores_csv(session, sweep_id), secrets))
        _text(root / "excluded.csv", mask_known(_excluded_csv(session, sweep_id), secrets))
        _text(root / "human_decisions.csv", mask_known(_decisions_csv(summary), secrets))
        seal = {"seal_hash": sweep.seal_hash, "components": sweep.seal_components,
                "afpbench_version": sweep.afpbench_version}
        notices = list(sweep.notices or [])
    _text(root / "seal.json", json.dumps(seal, indent=2, sort_keys=True) + "\n")
    _text(root / "summary.json",
          json.dumps(summary.model_dump(mode="json"), indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    if renderer is not None:
        _text(root / "summary.md", renderer(summary, "md"))
        _text(root / "report.html", renderer(summary, "html"))
    else:
        _text(root / "summary.md", _plain_summary_md(summary))
    for table in REPORT_TABLES:
        _text(root / "tables" / f"{table.id}.csv", mask_known(table_csv(table.render(summary)), secrets))
    _text(root / "LIMITATIONS.md", limitations_text(summary, notices))
    missing = missing_items(root, summary)
    status = PUBLISHED if not missing else protocol()["pending_status"]
    _text(root / "STATUS.md", _status_text(status, missing, summary))
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    return BundleReport(root, status, missing, files, summary.simulated)


def _text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", newline="\n")


def _write_fixtures(root: Path, files: Iterable[FixtureFile]) -> None:
    (root / "fixtures").mkdir()
    for file in files:  # streamed from the rows, one file at a time
        _text(root / "fixtures" / Path(file.name).name, file.text)  # base name only: no path from the data


def _write_instructions(root: Path, instructions: dict[str, Any], seal_components: dict[str, Any]) -> None:
    texts = instructions.get("texts") or {}
    (root / "instructions").mkdir()
    for condition, text in sorted(texts.items()):
        _text(root / "instructions" / f"{Path(condition).name}.md", text)
    if texts:
        manifest = {"name": instructions.get("name"), "version": instructions.get("version"),
                    "sha256": {c: h for c, h in (seal_components.get("instructions") or {}).items() if c in texts},
                    "note": "condition A carries no instruction by design; its file is empty"}
        _text(root / "instructions" / "manifest.json", json.dumps(manifest, indent=2) + "\n")


def _rubric_yaml(sweep: Sweep) -> str:
    proto = protocol()
    body = {
        "protocol": {"name": proto["name"], "version": proto["version"]},
        "rubric": proto["rubric"],
        "fatal_criteria": proto["fatal_criteria"],
        "pass_rule": sweep.spec.get("pass_rule"),
        "dispute_rule": sweep.spec.get("dispute_rule"),
        "sealed_sha256": {k: sweep.seal_components.get(k) for k in ("pass_rule", "dispute_rule", "protocol")},
    }
    return yaml.safe_dump(body, sort_keys=False, allow_unicode=True, width=100)


def _scores_csv(session: Session, sweep_id: str) -> str:
    dims = [getattr(Result, d) for d in DIMENSIONS]
    q = (select(col(Cell.id), col(Cell.model_label), col(Cell.condition), col(Cell.fixture_id),
                col(Cell.fixture_version), col(Cell.repeat), col(Cell.state), col(Result.scoring_run), *dims,
                col(Result.total), col(Result.fatal_criterion))
         .select_from(Cell)
         .outerjoin(Result, and_(col(Result.cell_id) == Cell.id, is_latest_result()))
         .where(col(Cell.sweep_id) == sweep_id).order_by(col(Cell.id)))
    header = ["cell_id", "model", "condition", "fixture_id", "fixture_version", "repeat", "state", "scoring_run",
              *DIMENSIONS, "total", "fatal_criterion"]
    return csv_text(header, ([("" if v is None else v) for v in row] for row in session.execute(q)))


def _excluded_csv(session: Session, sweep_id: str) -> str:
    q = (select(col(Cell.id), col(Cell.model_label), col(Cell.condition), col(Cell.fixture_id),
                col(Cell.fixture_version), col(Cell.repeat), col(Cell.state), col(Cell.attempts),
                col(Cell.state_reason))
         .where(col(Cell.sweep_id) == sweep_id, col(Cell.state).in_(EXCLUDED)).order_by(col(Cell.state), col(Cell.id)))
    header = ["cell_id", "model", "condition", "fixture_id", "fixture_version", "repeat", "state", "attempts",
              "reason"]
    return csv_text(header, ([("" if v is None else v) for v in row] for row in session.execute(q)))


def _decisions_csv(summary: SweepSummary) -> str:
    """Every human decision, field by field as recorded (header only when there is none: the file says so by
    being there). The report's table of them is tables/human_decisions.csv."""
    head = list(HumanDecisionEntry.model_fields)
    rows = [[d.model_dump()[k] for k in head] for d in summary.human_decisions]
    return csv_text(head, ([("" if v is None else v) for v in row] for row in rows))


def missing_items(root: Path, summary: SweepSummary) -> list[str]:
    """Publication items that are absent or empty, then the reasons results are not final yet."""
    missing = []
    for item, paths in ITEM_FILES.items():
        empty = [p for p in paths if not _non_empty(root / p)]
        if item == "instructions" and not empty:
            empty = _empty_instructions(root, summary.conditions)
        if empty:
            missing.append(f"{item}: missing or empty: {', '.join(empty)}")
    if not summary.complete:
        missing.append(f"results: sweep is not complete (status {summary.status}, "
                       f"{summary.unfinished} of {summary.cells} cells unfinished)")
    high_risk = summary.high_risk
    if not high_risk.ready:
        missing.append(f"comparisons: high-risk fixtures lack {high_risk.required_repeats} "
                       f"finished repeats per condition ({high_risk.lacking_count} groups)")
    return missing


def _non_empty(path: Path) -> bool:
    if path.is_dir():
        return any(p.is_file() and p.stat().st_size > 0 for p in path.iterdir())
    return path.is_file() and path.stat().st_size > 0


def _empty_instructions(root: Path, conditions: list[str]) -> list[str]:
    """Every condition run needs its file; only A (no instruction by design) may be empty."""
    out = []
    for c in conditions:
        f = root / "instructions" / f"{c}.md"
        if not f.is_file() or (c != "A" and f.stat().st_size == 0):
            out.append(f"instructions/{c}.md")
    return out


def limitations_text(summary: SweepSummary, notices: list[str]) -> str:
    scope = protocol()["scope"]
    lines = [
        "# Limitations", "",
        f"- {scope['limitation']} This benchmark measures the text layer only: every fact, conflict and "
        "constraint is inside the fixture.",
        f"- Out of scope: {', '.join(scope['excludes'])}.",
        "- Pass rates count MODEL_PASS and MODEL_FAIL only; blocked, infrastructure, invalid-test and "
        "disputed runs are listed in excluded.csv and counted beside every rate.",
        "- Zero failures are an estimate: read them with the exact upper bound given, never as certainty.",
        "- Scores come from the configured judges and deterministic assertions; judges are models and can err.",
        "- Cost figures use the prices declared in the spec and exclude judge calls.",
    ]
    if summary.simulated:
        parts = " and ".join(summary.simulated_parts or ["models"])
        lines.insert(2, f"- **SIMULATED**: this sweep used the simulated provider ({parts}). Its outputs and "
                        "scores are synthetic and say nothing about any real model.")
    if not summary.complete:
        lines.append("- The sweep is not complete: every figure is interim.")
    if summary.human_decisions:
        overrides = sum(d.override for d in summary.human_decisions)
        lines.append(f"- {len(summary.human_decisions)} human decisions set cell states ({overrides} overrides of "
                     "a judged verdict); each is listed in human_decisions.csv with from, to, reviewer and reason.")
    lines += [f"- Notice: {n}" for n in notices]
    return "\n".join(lines) + "\n"


def _status_text(status: str, missing: list[str], summary: SweepSummary) -> str:
    lines = [f"# Status: {status}", "",
             f"Sweep {summary.sweep_id} ({summary.name}), seal {summary.seal_hash}."]
    if summary.simulated:
        lines += ["", "SIMULATED: outputs in this bundle come from the simulated provider."]
    if missing:
        lines += ["", "Missing before this can read published:", *[f"- {m}" for m in missing]]
    return "\n".join(lines) + "\n"


def _plain_summary_md(summary: SweepSummary) -> str:
    """Every summary table in Markdown when no renderer is given (the CLI passes api.report's)."""
    lines = [f"# Summary: {summary.name}", "", condition_legend(summary.conditions)]
    for table in REPORT_TABLES:
        lines += ["", *markdown(table.render(summary))]
    return "\n".join(lines) + "\n"
