"""The example sweep specs shipped in the package (afpbench.reference/specs/*.yaml) are valid specs.

They are read the way an installed copy reads them (importlib.resources), parsed with the project's own
spec loader, and checked for what makes them usable as a starting point: a judge (without one every
answered cell is GRADER_DISPUTE), keys named by environment variable only, and the provider each file's
name promises.
"""

from __future__ import annotations

from importlib import resources

import pytest
import yaml

from afpbench.workers.sweeps.spec import RESERVED_KEY_VARIABLES, SweepSpec
from afpbench.workers.sweeps.spec_loading import parse_spec

EXPECTED = {
    "openai.yaml": {"openai"},
    "anthropic.yaml": {"anthropic"},
    "gemini.yaml": {"gemini"},
    "local-openai-compatible.yaml": {"openai-compatible"},
    "two-models-with-judge.yaml": None,  # any providers; at least two models and a judge
}
# Providers that need no key: a local server, the simulator.
KEYLESS = {"openai-compatible", "vllm", "ollama", "sim"}


def specs_dir():
    return resources.files("afpbench.reference").joinpath("specs")


def packaged() -> dict[str, str]:
    if not specs_dir().is_dir():
        return {}
    return {f.name: f.read_text(encoding="utf-8") for f in specs_dir().iterdir() if f.name.endswith(".yaml")}


def parsed(name: str) -> SweepSpec:
    return parse_spec(yaml.safe_load(packaged()[name]), f"afpbench.reference/specs/{name}")


def test_the_five_documented_examples_are_packaged():
    assert specs_dir().is_dir(), "afpbench.reference has no specs/ directory"
    missing = set(EXPECTED) - set(packaged())
    assert not missing, f"example specs missing from afpbench.reference/specs: {sorted(missing)}"


@pytest.mark.parametrize("name", sorted(packaged()) or ["(none)"])
def test_every_packaged_example_parses_with_the_spec_loader(name):
    assert name in packaged(), "no example specs packaged"
    spec = parsed(name)
    assert spec.models and spec.judges, f"{name}: an example needs a model and a judge"
    assert not any(m.simulated for m in [*spec.models, *spec.judges]), f"{name}: examples are real providers"
    for m in [*spec.models, *spec.judges]:
        if m.provider not in KEYLESS:
            assert m.api_key_env, f"{name}: {m.display} names no api_key_env"
        assert m.api_key_env not in RESERVED_KEY_VARIABLES
    assert packaged()[name].lstrip().startswith("#"), f"{name}: an example starts with a comment saying how to use it"


def test_the_examples_also_load_from_a_file_path(tmp_path):
    """`afpbench run SPEC.yaml` goes through load_spec (size cap, duplicate keys, alias limits)."""
    from afpbench.workers.sweeps.spec_loading import load_spec

    for name, text in packaged().items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        assert load_spec(path).resolved() == parsed(name).resolved(), name


@pytest.mark.parametrize("name", sorted(n for n, p in EXPECTED.items() if p))
def test_each_single_provider_example_uses_the_provider_it_is_named_after(name):
    spec = parsed(name)
    assert {m.provider for m in spec.models} == EXPECTED[name]


def test_local_example_points_at_a_local_openai_compatible_server():
    (model,) = parsed("local-openai-compatible.yaml").models
    assert model.base_url == "http://127.0.0.1:8080/v1"
    assert model.api_key_env is None


def test_two_models_example_compares_two_models_under_a_judge_of_another_family():
    spec = parsed("two-models-with-judge.yaml")
    assert len(spec.models) >= 2 and spec.judges
    assert {j.family for j in spec.judges}.isdisjoint({m.family for m in spec.models})
