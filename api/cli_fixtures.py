"""`afpbench fixtures validate|show|check`."""

from __future__ import annotations

import json

import typer
import yaml
from rich.console import Console

from afpbench.api.cli_results import CommandError

app = typer.Typer(rich_markup_mode=None, no_args_is_help=True,
                   help="Validate and inspect fixture sets.")


@app.command()
def validate(
    directory: str | None = typer.Argument(None, help="fixture directory; omitted: the pilot set"),
) -> None:
    """Schema-check every fixture and run the validity gate against the default A-D texts."""
    from afpbench.fixtures.loader import load_fixtures

    fixtures = load_fixtures(directory)
    gate = _default_gate()
    failed = 0
    for fx in fixtures:
        report = gate(fx)
        if report["passed"]:
            typer.echo(f"ok    {fx.key}  {fx.title}")
        else:
            failed += 1
            for f in report["failures"]:
                typer.echo(f"FAIL  {fx.key}  {f['check']}: {f['detail']}")
    typer.echo(f"{len(fixtures)} fixtures, {failed} failing the validity gate")
    if failed:
        raise typer.Exit(1)


@app.command()
def show(fixture_id: str, directory: str | None = typer.Option(None, "--dir")) -> None:
    """Print a fixture and the prompt every condition renders for it."""
    from afpbench.fixtures.loader import load_fixture
    from afpbench.reference.loader import load_instructions
    from afpbench.scoring.render import render

    fx = load_fixture(fixture_id, directory)
    out = Console()
    out.print(f"[bold]{fx.key}[/bold] {fx.title}  (risk: {fx.risk}; high-risk: {fx.high_risk})")
    out.print(
        yaml.safe_dump(fx.model_dump(mode="json", by_alias=True), sort_keys=False, allow_unicode=True),
        markup=False,
    )
    prompt = render("A", fx, load_instructions().text("A"))
    out.print("[bold]user message (identical in A-D)[/bold]")
    out.print(prompt.user, markup=False)


def _fixture_arg(fixture: str, directory: str | None):
    """An id of the packaged set (or of --dir), or a path to one fixture YAML file."""
    from pathlib import Path

    from afpbench.fixtures.loader import FixtureFile, InputFileError, load_fixture, parse_fixture, read_input_text

    path = Path(fixture)
    if fixture.endswith((".yaml", ".yml")) or path.is_file():
        if not path.is_file():
            raise CommandError(f"FIXTURE {fixture}: file not found")
        try:
            return parse_fixture(FixtureFile(path.name, read_input_text(path)))
        except InputFileError as exc:
            raise CommandError(f"FIXTURE {fixture}: {exc}") from None
    return load_fixture(fixture, directory)


def _input_text(option: str, name: str) -> str:
    from pathlib import Path

    from afpbench.fixtures.loader import InputFileError, read_input_text

    path = Path(name)
    if not path.is_file():
        raise CommandError(f"{option} {name}: file not found")
    try:
        return read_input_text(path)
    except InputFileError as exc:
        raise CommandError(f"{option} {name}: {exc}") from None


def _tool_calls(name: str) -> list[str]:
    """`--tool-calls FILE`: a JSON list of {"expression": "..."}, the calculator calls in order."""
    text = _input_text("--tool-calls", name)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(f"--tool-calls {name}: not valid JSON (line {exc.lineno}, column {exc.colno})") from None
    if not isinstance(data, list):
        raise CommandError(f'--tool-calls {name}: expected a JSON list of {{"expression": "..."}} objects')
    expressions = []
    for i, item in enumerate(data):
        if not isinstance(item, dict) or set(item) != {"expression"} or not isinstance(item["expression"], str):
            raise CommandError(f'--tool-calls {name}: item {i} must be {{"expression": "<calculator expression>"}}')
        expressions.append(item["expression"])
    return expressions


def _default_gate():
    """The validity gate a sweep runs (workers/sweeps/gate_run.py), with the packaged texts and prompt."""
    from afpbench.reference.loader import load_instructions, load_judge_prompt
    from afpbench.workers.sweeps.gate_run import fixture_gate

    return fixture_gate(load_instructions(), load_judge_prompt())


@app.command()
def check(
    fixture: str = typer.Argument(..., help="a fixture id (packaged set, or --dir) or a path to a fixture YAML"),
    answer: str = typer.Option(..., "--answer", help="file holding the answer text to score"),
    tool_calls: str | None = typer.Option(
        None, "--tool-calls", metavar="FILE",
        help='file holding a JSON list of the calculator calls the answer made, in order, e.g. '
             '[{"expression": "84000 * 0.10"}]'),
    judge: list[str] = typer.Option(
        [], "--judge", metavar="PROVIDER:MODEL", help="e.g. sim:sim-judge (repeat for several judges)"
    ),
    base_url: str | None = typer.Option(None, help="the judge's base URL"),
    api_key_env: str | None = typer.Option(None, help="environment variable holding the judge's key"),
    timeout: float | None = typer.Option(None, "--timeout", metavar="SECONDS",
                                         help="each judge call's timeout (a spec's timeout_s; default 120)"),
    judge_param: list[str] = typer.Option(
        [], "--judge-param", metavar="KEY=VALUE",
        help="a request parameter for the judge, as a spec's params (value read as YAML), e.g. "
             "temperature=0 or max_tokens=800; repeat for several"),
    save: str | None = typer.Option(None, "--save", metavar="FILE",
                                    help="also write the findings, with each judge reply's text, as JSON"),
    directory: str | None = typer.Option(None, "--dir", help="fixture directory for an id"),
    as_json: bool = typer.Option(False, "--json", help="print the findings as JSON"),
) -> None:
    """Score one answer without a sweep: assertions with their spans, invariants, figures, provenance,
    and with --judge the verdict and its state (default pass and dispute rules), with each judge reply's
    text. Exit 3 when a judge got no reply to any call: the answer could not be judged (INFRA_ERROR)."""
    from afpbench.scoring.answer_check import check_answer

    fx = _fixture_arg(fixture, directory)
    text = _input_text("--answer", answer)
    expressions = _tool_calls(tool_calls) if tool_calls else []
    if expressions and fx.numeric is None:
        raise CommandError(f"--tool-calls {tool_calls}: {fx.key} is not a numeric fixture (no calculator offered)")
    result = check_answer(fx, text, expressions)
    record = result.as_record()
    record["validity"] = _default_gate()(fx)
    unavailable = None
    if judge:
        from afpbench.api.cli_scoring import judge_from_option

        judges = [judge_from_option(o, base_url, api_key_env, timeout, _params(judge_param)) for o in judge]
        record["judgement"], unavailable = _judged(fx, result, record["validity"], judges)
    if save:
        _save(save, record)
    if as_json:
        typer.echo(json.dumps(record, indent=2, default=str))
    else:
        _print(record)
    if unavailable:
        # The answer was not judged (a judge got no reply): exit 3, as a run whose cells were excluded.
        from afpbench.workers.errors import ExcludedForConfiguration

        raise typer.Exit(ExcludedForConfiguration.exit_code)


def _params(options: list[str]) -> dict:
    """`--judge-param KEY=VALUE` options as a spec's params (each value read as YAML: 0 is a number)."""
    out = {}
    for option in options:
        key, sep, value = option.partition("=")
        if not sep or not key.strip():
            raise CommandError(f"--judge-param {option!r}: expected KEY=VALUE, e.g. temperature=0")
        out[key.strip()] = yaml.safe_load(value) if value.strip() else ""
    return out


def _save(path: str, record: dict) -> None:
    from pathlib import Path

    try:
        Path(path).write_text(json.dumps(record, indent=2, default=str, ensure_ascii=False), encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"--save {path}: cannot write: {exc.strerror or exc}") from None


def _judged(fx, result, validity: dict, judges: list):
    """The judges asked about the answer exactly as in a sweep (workers/grading/answer_judging.py);
    (the report's judgement part, why it could not be judged)."""
    from contextlib import ExitStack

    from afpbench.reference.loader import load_judge_prompt
    from afpbench.workers.grading.answer_judging import judge_answer
    from afpbench.workers.settings import get_settings
    from afpbench.workers.sim.local import needs_local_sim, start_local_sim

    with ExitStack() as stack:
        if needs_local_sim(judges):
            start_local_sim(stack, get_settings())
        judged = judge_answer(fx, result.answer, result.tool_calls, validity, judges, load_judge_prompt())
    v = judged.verdict
    return {
        "judges": [j.display for j in judges],
        "simulated": any(j.simulated for j in judges),
        "tries": judged.tries,
        "judge_unavailable": judged.judge_unavailable,
        "verdict": {
            "state": v.state.value, "scores": v.scores, "total": v.total, "fatal_criterion": v.fatal_criterion,
            "rationale": v.rationale, "dispute_reasons": v.dispute_reasons,
        },  # fmt: skip
    }, judged.judge_unavailable


def _print(record: dict) -> None:
    """Plain lines (no wrapping: spans and quotes stay on one line each)."""
    lines = []
    fatal = record["proposed_fatal"]
    sources = ", ".join(p["source"] for p in record["proposals"])
    lines.append(f"{record['fixture']}  proposed fatal: {fatal or 'none'}" + (f" (from {sources})" if fatal else ""))
    if not record["validity"]["passed"]:
        lines += [f"  validity gate FAIL {f['check']}: {f['detail']}" for f in record["validity"]["failures"]]
    for a in record["assertions"]:
        label = "FIRED" if a["fired"] else "ok   "
        where = f" at {a['span'][0]}-{a['span'][1]} {a['matched']!r}" if a["span"] else ""
        role = a.get("fatal_criterion") or a.get("dimension")
        lines.append(f"  {label} {a['id']} ({a['kind']}, {role}): {a['detail']}{where}")
    figures = ", ".join(f"{f['text']} = {f['value']}{' ' + f['unit'] if f['unit'] else ''}" for f in record["figures"])
    lines.append(f"  figures: {figures or 'none'}")
    prov = record["provenance"]
    if prov is not None:
        answer = prov["answer"]
        shown = answer["figure"]["text"] if answer.get("figure") else answer["kind"]
        lines.append(f"  provenance: answer figure {shown} (correct: {prov['answer_correct']}); "
                     f"originated: {', '.join(prov['originated']) or 'none'}; evidence {prov['evidence_class']}")
    judged = record.get("judgement")
    if judged:
        label = " (SIMULATED judge)" if judged["simulated"] else ""
        lines.append(f"  judge verdict{label}: {judged['verdict']['state']} ({judged['verdict']['rationale']})")
        lines += [f"    dispute: {reason}" for reason in judged["verdict"]["dispute_reasons"]]
        for t in judged["tries"]:
            head = f"    {t['judge']}, round {t['round']}" + (f": {t['error']}" if t["error"] else "")
            lines += [head, *(f"      | {line}" for line in (t["text"] or "(no text)").splitlines())]
    typer.echo("\n".join(lines))
