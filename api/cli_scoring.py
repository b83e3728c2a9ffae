"""`afpbench adjudicate list|show|decide`, `afpbench rescore`, `afpbench calibrate`."""

from __future__ import annotations

import json
from contextlib import ExitStack

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from afpbench.api.cli_results import CommandError

adjudicate_app = typer.Typer(rich_markup_mode=None, no_args_is_help=True,
                   help="Human adjudication of GRADER_DISPUTE cells.")


def judge_from_option(judge: str, base_url: str | None, api_key_env: str | None,
                      timeout_s: float | None = None, params: dict | None = None):
    """`provider:model` (e.g. `openai:gpt-4o-mini`, `sim:sim-1`) into a judge ModelSpec; a timeout and
    request parameters as a spec's judge entry takes them (`timeout_s`, `params`), checked the same way."""
    from afpbench.workers.errors import SpecError
    from afpbench.workers.sweeps.spec_loading import parse_spec

    if ":" not in judge:
        raise CommandError(
            f"--judge {judge!r}: expected PROVIDER:MODEL, e.g. openai:gpt-4o-mini or sim:sim-1"
        )
    provider, model = judge.split(":", 1)
    entry = {"provider": provider, "model": model, "base_url": base_url, "api_key_env": api_key_env,
             **({"timeout_s": timeout_s} if timeout_s is not None else {}), **({"params": params} if params else {})}
    try:
        return parse_spec({"models": [entry], "judges": []}, "--judge").models[0]
    except SpecError as exc:
        raise CommandError(str(exc)) from None


def _with_sim(stack: ExitStack, judges) -> None:
    from afpbench.workers.settings import get_settings
    from afpbench.workers.sim.local import needs_local_sim, start_local_sim

    if needs_local_sim(judges):
        start_local_sim(stack, get_settings())


@adjudicate_app.command("list")
def list_(sweep: str | None = typer.Argument(None, help="sweep id; omitted: every sweep")) -> None:
    """Cells awaiting a human decision."""
    from afpbench.workers.grading.adjudication import list_disputes

    rows = list_disputes(sweep)
    from rich import box

    where = f" of sweep {sweep}" if sweep else ""
    table = Table(title=f"{len(rows)} cells in GRADER_DISPUTE{where}", box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0),
                  show_edge=False, caption="`afpbench adjudicate show CELL` for one")
    heads = ("cell", "model", "cond", "fixture", "rep") if sweep else ("cell", "sweep", "model", "cond", "fixture",
                                                                         "rep")
    for head in heads:
        table.add_column(head, no_wrap=head != "model", overflow="fold", max_width=12 if head == "model" else None)
    table.add_column("reason", ratio=1, min_width=20)  # wrapped at spaces, never cut
    for r in rows:
        values = {"cell": str(r["cell_id"]), "sweep": r["sweep_id"], "model": Text(r["model"]),
                  "cond": r["condition"], "fixture": r["fixture"], "rep": str(r["repeat"])}
        table.add_row(*(values[h] for h in heads), Text(r["reason"] or ""))
    Console().print(table)


@adjudicate_app.command("show")
def show(cell: int = typer.Argument(..., help="cell id (from `adjudicate list`)"),
         as_json: bool = typer.Option(False, "--json", help="the full run record and history as JSON")) -> None:
    """A disputed cell: its record and answer, why it is disputed, each judge's scores and rationales,
    its results and human decisions so far."""
    from afpbench.api.cli_report import record_json, record_table
    from afpbench.api.dispute_text import dispute_view
    from afpbench.workers.grading.adjudication import history

    record = record_json(cell)
    if as_json:
        record["history"] = history(cell)
        typer.echo(json.dumps(record, indent=2, default=str, ensure_ascii=False))
        return
    Console().print(dispute_view(record, record_table(record)))


@adjudicate_app.command("decide")
def decide(
    cell: int,
    state: str = typer.Option(
        ..., help="MODEL_PASS, MODEL_FAIL, PROVIDER_BLOCK, INFRA_ERROR or INVALID_TEST"
    ),
    reviewer: str = typer.Option(..., help="who decides"),
    note: str = typer.Option(..., help="why"),
    scores: str | None = typer.Option(None, help="four scores 0-2 in rubric order, e.g. 2,2,1,2"),
    fatal: str | None = typer.Option(None, help="fatal criterion id, if any"),
    override: bool = typer.Option(
        False, "--override", help="decide a cell that is not GRADER_DISPUTE (needs --reason)"
    ),
    reason: str | None = typer.Option(None, help="why a judged verdict is overridden (with --override)"),
) -> None:
    """Record a human decision on a GRADER_DISPUTE cell (any other cell only with --override and a
    reason); the cell's state follows it, earlier rows stay as history, the report lists it."""
    from afpbench.reference.protocol_facts import DIMENSIONS
    from afpbench.workers.errors import AdjudicationError
    from afpbench.workers.grading.adjudication import record_human_decision

    parsed: dict[str, int] | None = None
    if scores:
        parts = [p.strip() for p in scores.split(",")]
        if len(parts) != 4 or not all(p in ("0", "1", "2") for p in parts):
            raise CommandError(f"--scores {scores!r}: expected four values 0-2 for {', '.join(DIMENSIONS)}")
        parsed = dict(zip(DIMENSIONS, map(int, parts), strict=True))
    try:
        out = record_human_decision(cell, reviewer, state, note, parsed, fatal, override=override, reason=reason)
    except AdjudicationError as exc:
        raise CommandError(str(exc)) from None
    kind = "override" if out["override"] else "decision"
    typer.echo(
        f"cell {out['cell_id']}: {out['from_state']} -> {out['state']} "
        f"({kind}, adjudication {out['adjudication_id']}, scoring run {out['scoring_run']})"
    )


def register(app: typer.Typer) -> None:
    app.add_typer(adjudicate_app, name="adjudicate")

    @app.command()
    def rescore(
        sweep: str,
        judge: str | None = typer.Option(None, help="PROVIDER:MODEL; default: the sweep's sealed judges"),
        base_url: str | None = typer.Option(None),
        api_key_env: str | None = typer.Option(None),
        over_decisions: bool = typer.Option(
            False, "--over-decisions", help="also rescore cells a human decided (default: keep the decision)"
        ),
    ) -> None:
        """Score again from stored raw outputs (no call to the tested model); adds a new scoring run.

        Cells whose latest verdict is a human decision keep it unless --over-decisions is given."""
        from afpbench.workers.errors import AdjudicationError
        from afpbench.workers.grading.adjudication import rescore_sweep

        judges = [judge_from_option(judge, base_url, api_key_env)] if judge else None
        with ExitStack() as stack:
            if judges:
                _with_sim(stack, judges)
            else:
                from afpbench.workers.store.db import session_scope
                from afpbench.workers.store.models import Sweep
                from afpbench.workers.sweeps.spec_loading import parse_spec

                with session_scope() as session:
                    row = session.get(Sweep, sweep)
                    if row is None:
                        raise CommandError(f"no sweep with id {sweep!r}")
                    _with_sim(stack, parse_spec(row.spec).judges)
            try:
                outcome = rescore_sweep(sweep, judges, over_decisions=over_decisions)
            except AdjudicationError as exc:
                raise CommandError(str(exc)) from None
        counts = outcome.counts
        typer.echo(
            f"rescored {sum(counts.values())} cells: "
            + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        )
        if outcome.kept_decisions:
            typer.echo(
                f"kept the human decision on {len(outcome.kept_decisions)} cells "
                f"({', '.join(map(str, outcome.kept_decisions))}); --over-decisions rescores them too"
            )

    @app.command()
    def calibrate(
        judge: str = typer.Option(..., help="PROVIDER:MODEL, e.g. sim:sim-1 or openai:gpt-4o-mini"),
        base_url: str | None = typer.Option(None),
        api_key_env: str | None = typer.Option(None),
        fixtures_dir: str | None = typer.Option(None, "--fixtures"),
        as_json: bool = typer.Option(False, "--json"),
    ) -> None:
        """Run a judge over the canned responses with declared gold scores; report agreement."""
        from afpbench.workers.grading.calibration import calibrate as run_calibration

        spec = judge_from_option(judge, base_url, api_key_env)
        with ExitStack() as stack:
            _with_sim(stack, [spec])
            report = run_calibration(spec, fixtures_dir)
        if as_json:
            typer.echo(json.dumps({**report.__dict__, "agreement": report.agreement.model_dump(mode="json")
                                    if report.agreement else None}, indent=2, default=str))
        else:
            _print_calibration(report)
        why = report.could_not_judge()
        if why:
            from afpbench.workers.errors import ExcludedForConfiguration

            raise ExcludedForConfiguration(f"calibration could not judge (exit 3): {why}")


def _print_calibration(report) -> None:
    label = " (SIMULATED judge)" if report.simulated else ""
    typer.echo(
        f"judge {report.judge}{label}: {report.items} responses, {report.unparseable} unparseable, "
        f"{report.failed_calls} failed calls"
    )
    for dim, share in report.exact_by_dimension.items():
        typer.echo(f"  exact match {dim}: {share:.0%}")
    kappa = "undefined" if report.kappa is None else f"{report.kappa:.3f}"
    detail = report.agreement
    if detail is not None and detail.interval is not None:
        kappa += f" (95% CI {detail.interval[0]:.3f} to {detail.interval[1]:.3f}, n = {detail.n})"
    agreement = "n/a" if report.pass_fail_agreement is None else f"{report.pass_fail_agreement:.0%}"
    typer.echo(f"  pass/fail agreement {agreement}; Cohen's kappa {kappa}")
    if detail is not None and detail.base_rates is not None:
        gold, judged = detail.base_rates
        typer.echo(f"  base rates: gold passes {gold:.0%}, the judge passes {judged:.0%} (kappa reads agreement "
                   "beyond what these rates give by chance)")
