"""`afpbench plan`: what a sweep can show before any request is made (workers/planning/): per comparison
the minimum detectable difference at the spec's fixtures and repeats and the repeats needed to detect
`--detect`, under the variance of a pilot sweep (`--from`) or the stated defaults, printed either way;
and what it will cost, per model and judge (requests, tokens, sync and batch lane US dollars, wall time),
with the pilot's measured output tokens and swapped re-judges when one is named."""

from __future__ import annotations

import json

import typer


def register(app: typer.Typer) -> None:
    app.command()(plan)


def plan(
    spec: str | None = typer.Argument(None, help="sweep spec YAML; omitted: the simulated demo sweep"),
    pilot: str | None = typer.Option(None, "--from", help="a pilot sweep id: its pairs give the variance, its "
                                                          "answers and judgements the output tokens of the cost"),
    detect: float = typer.Option(0.10, "--detect", min=0.001, max=1.0,
                                 help="difference in pass rate to detect, as a fraction (0.10 = 10 points)"),
    power: float = typer.Option(0.8, "--power", min=0.5, max=0.999, help="the probability of detecting it"),
    alpha: float = typer.Option(0.05, "--alpha", min=0.0001, max=0.5, help="two-sided significance level"),
    as_json: bool = typer.Option(False, "--json", help="print the plan as JSON on stdout"),
    no_judge_check: bool = typer.Option(False, "--no-judge-check",
                                        help="skip trying the judges on calibration answers"),
) -> None:
    """Plan a sweep's power before running it: MDD and repeats needed per comparison (docs/PROTOCOL.md).
    Like `run`, it first tries the spec's real judges on a few calibration answers (`judge_check:`)."""
    from afpbench.workers.grading.judge_check import run_judge_check
    from afpbench.workers.planning.cost import cost_plan
    from afpbench.workers.planning.pilot import measured
    from afpbench.workers.planning.power_plan import power_plan
    from afpbench.workers.sweeps.inputs import load_inputs
    from afpbench.workers.sweeps.spec_loading import demo_spec, load_spec

    sweep_spec = load_spec(spec) if spec else demo_spec()
    inputs = load_inputs(sweep_spec)
    made = power_plan(sweep_spec, inputs.fixture_facts(), pilot, detect, power, alpha).model_copy(
        update={"cost": cost_plan(sweep_spec, inputs, measured(pilot))})
    if not no_judge_check:  # raises JudgeCheckFailed: one line, exit 2
        run_judge_check(sweep_spec, inputs.judge_prompt,
                        lambda check: typer.echo(check.line(), err=True))
    if as_json:
        typer.echo(json.dumps(made.model_dump(mode="json"), indent=2))
    else:
        typer.echo("\n".join(made.lines()))
