"""A sweep spec read from its data (a posted body, a command line's choices) or from a YAML file, with
every problem named in one message (reference/validation_errors.py words them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from afpbench.fixtures.yaml_loading import load_yaml
from afpbench.reference.files import InputFileError, read_input_text
from afpbench.reference.validation_errors import as_message, problem_lines
from afpbench.workers.errors import SpecError
from afpbench.workers.sweeps.sources import resolve_spec_paths
from afpbench.workers.sweeps.spec import NO_JUDGES, SweepSpec
from afpbench.workers.sweeps.spec_secrets import literal_secret_at

# Validation context of a spec that arrives from outside (a spec file, a posted body): also apply the
# operator's settings-dependent rules (the key allow-list). Stored specs are re-read without it: they
# were checked when accepted, and the key is checked again where it is read (types.key_for).
OPERATOR_POLICY = {"operator_policy": True}


def _describe(exc: ValidationError) -> str:
    """Every error of the spec, one line each (one error: on the same line as the source)."""
    lines = problem_lines(exc, SweepSpec)
    missing = f"judges: {NO_JUDGES}"
    if missing in lines and any(line.endswith("did you mean 'judges'?") and "." not in line.split(":")[0]
                                for line in lines):
        lines.remove(missing)  # the typo'd key already says where the judges went
    return as_message(lines)


def parse_spec(data: Any, source: str = "spec", *, operator_policy: bool = False) -> SweepSpec:
    """A spec from its data. `operator_policy`: the spec arrives from outside (a file, a command line),
    so the rules that depend on this server's settings apply too (see OPERATOR_POLICY)."""
    if not isinstance(data, dict):
        what = "empty file" if data is None else type(data).__name__
        raise SpecError(f"{source}: expected a mapping of sweep fields, got {what}")
    where = literal_secret_at(data)
    if where:
        raise SpecError(
            f"{source}: {where}: looks like a literal credential, which is not allowed in a spec: put the "
            "key in an environment variable and name that variable in 'api_key_env'"
        )
    try:
        return SweepSpec.model_validate(data, context=OPERATOR_POLICY if operator_policy else None)
    except ValidationError as exc:
        raise SpecError(f"{source}: {_describe(exc)}") from None


def load_spec(path: str | Path) -> SweepSpec:
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"{path}: spec file not found")
    try:
        # Size cap, UTF-8 check (reference/files.py), alias bombs and duplicate keys (fixtures/yaml_loading.py).
        data = load_yaml(read_input_text(p))
    except InputFileError as exc:
        raise SpecError(f"{path}: {exc}") from None
    # Paths in a spec file mean what they say next to the file, whatever directory afpbench runs in.
    return resolve_spec_paths(parse_spec(data, str(path), operator_policy=True), p, str(path))


def demo_spec() -> SweepSpec:
    """The zero-configuration demo: every pilot fixture x A-D x the simulated model, judged by sim."""
    sim = {"provider": "sim", "model": "sim-1", "label": "sim (simulated)"}
    return parse_spec(
        {"name": "demo (simulated)", "models": [sim], "judges": [{**sim, "label": "sim-judge (simulated)"}]},
        "demo",
    )
