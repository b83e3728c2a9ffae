"""`afpbench fixtures validate|show`."""

from __future__ import annotations

import typer
import yaml
from rich.console import Console

app = typer.Typer(no_args_is_help=True, help="Validate and inspect fixture sets.")


@app.command()
def validate(
    directory: str | None = typer.Argument(None, help="fixture directory; omitted: the pilot set"),
) -> None:
    """Schema-check every fixture and run the validity gate against the default A-D texts."""
    from afpbench.fixtures.loader import load_fixtures
    from afpbench.reference.loader import load_instructions, load_judge_prompt
    from afpbench.scoring.render import render
    from afpbench.scoring.validity import check_fixture
    from afpbench.scoring.vocabulary import afp_terms

    fixtures = load_fixtures(directory)
    instructions = load_instructions()
    terms = afp_terms([instructions.text("C"), instructions.text("D")])
    judge_prompt = load_judge_prompt()
    failed = 0
    for fx in fixtures:
        prompts = {c: render(c, fx, instructions.text(c)) for c in ("A", "B", "C", "D")}
        report = check_fixture(fx, prompts, terms, judge_prompt)
        if report.passed:
            typer.echo(f"ok    {fx.key}  {fx.title}")
        else:
            failed += 1
            for f in report.failures:
                typer.echo(f"FAIL  {fx.key}  {f.check}: {f.detail}")
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
