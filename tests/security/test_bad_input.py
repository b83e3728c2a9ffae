"""Bad input is refused with one line naming the file and the field, exit status 2, and nothing written.

Every kind of malformed fixture and spec goes through `afpbench run` (a subprocess, SQLite in a temp
dir). Oversized and explosive YAML is refused before it is parsed or walked, quickly (checked in
process, where the time can be measured without the CLI's start-up).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from afpbench.fixtures.loader import FixtureError, load_fixtures
from afpbench.workers.errors import SpecError
from afpbench.workers.sweeps.inputs import load_inputs
from afpbench.workers.sweeps.spec_loading import load_spec
from tests.conftest import REPO
from tests.e2e.test_cli_errors import afpbench, one_line_error, row_count

PILOT = REPO / "fixtures" / "pilot"
P01 = (PILOT / "P01.yaml").read_text(encoding="utf-8")
SIM = {"provider": "sim", "model": "sim-1"}
BIG_BYTES = 50 * 1024 * 1024


def _p01(**changes) -> str:
    data = yaml.safe_load(P01)
    for key, value in changes.items():
        if value is None:
            data.pop(key)
        else:
            data[key] = value
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def _bomb(levels: int = 9, width: int = 9) -> str:
    """The 'billion laughs' shape: each level repeats the previous one `width` times via aliases."""
    lines = ["id: P01", f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]")
    lines.append(f"evidence: *l{levels - 1}")
    return "\n".join(lines) + "\n"


def _big(head: str) -> bytes:
    pad = b"# padding line to make this file very large\n"
    return head.encode() + pad * (BIG_BYTES // len(pad) + 1)


def _with_assertion(**fields) -> str:
    data = yaml.safe_load(P01)
    data["assertions"].append({"id": "extra", "kind": "invariant", "rationale": "a rationale long enough",
                               **fields})
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


P08 = yaml.safe_load((PILOT / "P08.yaml").read_text(encoding="utf-8"))
P08["numeric"]["source_fields"][0]["value"] = "-15200.00"

# case -> (files in the fixture directory, words the error line must contain besides the file name)
FIXTURE_CASES: dict[str, tuple[dict[str, str | bytes], list[str]]] = {
    "missing-field": ({"P01.yaml": _p01(outcome_requirement=None)}, ["outcome_requirement", "required"]),
    "wrong-type": ({"P01.yaml": _p01(high_risk=[1, 2])}, ["high_risk"]),
    "unknown-key": ({"P01.yaml": _p01(bogus_field="x")}, ["bogus_field", "unknown field"]),
    "negative-source-value": ({"P08.yaml": yaml.safe_dump(P08, sort_keys=False)},
                              ["numeric.source_fields.0.value", "negative"]),
    "bad-regex": ({"P01.yaml": _with_assertion(check="matches", pattern="([unclosed")}, ["not a valid regex"]),
    "duplicate-ids-across-files": ({"P01.yaml": P01, "P01-copy.yaml": P01}, ["P01", "P01-copy.yaml"]),
    "duplicate-key-in-file": ({"P01.yaml": P01 + "\nid: P02\n"}, ["duplicate key 'id'", "line"]),
    "duplicate-evidence-ids": ({"P01.yaml": P01.replace("  - id: E2\n", "  - id: E1\n", 1)},
                               ["duplicate evidence id", "E1"]),
    "non-utf8": ({"P01.yaml": P01.encode() + b"\n# caf\xe9 \xff\n"}, ["not UTF-8"]),
    "empty-file": ({"P01.yaml": ""}, ["empty file"]),
    "not-a-mapping": ({"P01.yaml": "- just\n- a list\n"}, ["expected a mapping"]),
    "yaml-syntax": ({"P01.yaml": "id: P01\ntask: [unclosed\n"}, ["not valid YAML at line"]),
    "impossible-date": ({"P01.yaml": P01.replace("date: 2023-07-01", "date: 2023-13-01", 1)},
                        ["not valid YAML", "month must be in 1..12"]),
    "alias-bomb": ({"P01.yaml": _bomb()}, ["expands to more than"]),
    "recursive-alias": ({"P01.yaml": "id: P01\nevidence: &e [*e]\n"}, ["refers to itself"]),
    "oversized-text": ({"P01.yaml": P01.replace("      No idea what", "      " + "x" * 25_000 + " No idea what", 1)},
                       ["evidence.2.text", "20000"]),
    "file-over-size-cap": ({"P01.yaml": _big(P01)}, ["50.0 MB", "limit"]),
}

SPEC_CASES: dict[str, tuple[str | bytes, list[str]]] = {
    "missing-models": (yaml.safe_dump({"name": "x", "judges": []}), ["models", "required"]),
    "wrong-type": (yaml.safe_dump({"judges": [], "models": [SIM], "repeats": "three"}), ["repeats"]),
    "unknown-key": (yaml.safe_dump({"judges": [], "models": [SIM], "repeets": 2}), ["repeets"]),
    "literal-api-key": (yaml.safe_dump({"judges": [], "models": [{**SIM, "api_key": "sk-live-abc"}]}),
                        ["models.0.api_key", "api_key_env"]),
    "literal-key-in-params": (yaml.safe_dump({"judges": [], "models": [{**SIM, "params": {"api_key": "abc123"}}]}),
                              ["models.0.params.api_key", "api_key_env"]),
    "key-shaped-value": (yaml.safe_dump({"name": "sk-proj-abcdefghij0123456789", "judges": [], "models": [SIM]}),
                         ["name", "literal credential"]),
    "our-own-secret-as-key": (yaml.safe_dump({"judges": [], "models": [{**SIM, "api_key_env": "AFP_API_TOKEN"}]}),
                              ["models.0.api_key_env", "AFP_API_TOKEN"]),
    "unknown-condition": (yaml.safe_dump({"judges": [], "models": [SIM], "conditions": ["A", "E"]}), ["conditions.1"]),
    "huge-repeats": (yaml.safe_dump({"judges": [], "models": [SIM], "repeats": 10**9}), ["repeats", "1000"]),
    "negative-limit": (yaml.safe_dump({"judges": [], "models": [{**SIM, "limits": {"requests_per_min": -5}}]}),
                       ["models.0.limits.requests_per_min"]),
    "bad-base-url": (yaml.safe_dump({"judges": [], "models": [{**SIM, "base_url": "file:///etc/passwd"}]}),
                     ["models.0.base_url", "http://"]),
    "unknown-provider": (yaml.safe_dump({"judges": [], "models": [{**SIM, "provider": "opnai"}]}),
                         ["unknown provider"]),
    "non-utf8": (yaml.safe_dump({"judges": [], "models": [SIM]}).encode() + b"# \xff\xfe\n", ["not UTF-8"]),
    "empty-file": ("", ["empty file"]),
    "yaml-syntax": ("models: [unclosed\n", ["not valid YAML at line"]),
    "duplicate-key": ("models: [{provider: sim, model: sim-1}]\njudges: []\nrepeats: 1\nrepeats: 2\n",
                      ["duplicate key"]),
    "alias-bomb": (_bomb().replace("id: P01", "models: [{provider: sim, model: sim-1}]\njudges: []"),
                   ["expands to more than"]),
    "file-over-size-cap": (_big(yaml.safe_dump({"judges": [], "models": [SIM]})), ["50.0 MB", "limit"]),
    "unknown-fixture-id": (yaml.safe_dump({"judges": [], "models": [SIM], "fixtures": {"only": ["P99"]}}), ["P99"]),
}


# Every case maps to FixtureError or SpecError, which the CLI turns into one line and exit 2; these
# representative cases (one per new code path) also go through `afpbench run` as a subprocess.
CLI_FIXTURE_CASES = ["non-utf8", "alias-bomb"]
CLI_SPEC_CASES = ["literal-key-in-params", "file-over-size-cap", "unknown-fixture-id"]


def _write(path: Path, content: str | bytes) -> None:
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))


def _fixture_case(root: Path, case: str) -> tuple[Path, Path]:
    """(work dir, spec path) for a fixture case; the fixture directory is not named `fixtures`, which
    `python -m` (cwd on sys.path) would take for the package."""
    files, _ = FIXTURE_CASES[case]
    work = root / f"fx-{case}"
    (work / "fx").mkdir(parents=True)
    for name, content in files.items():
        _write(work / "fx" / name, content)
    spec = work / "spec.yaml"
    spec.write_text(yaml.safe_dump({"models": [SIM], "judges": [], "fixtures": {"dir": str(work / "fx")}}))
    return work, spec


def _spec_case(root: Path, case: str) -> tuple[Path, Path]:
    content, _ = SPEC_CASES[case]
    work = root / f"spec-{case}"
    work.mkdir()
    _write(work / "bad-spec.yaml", content)
    return work, work / "bad-spec.yaml"


def _expected_name(kind: str, case: str) -> str:
    if kind == "fixture":
        return "P08.yaml" if case == "negative-source-value" else "P01.yaml"
    return "fixtures.only" if case == "unknown-fixture-id" else "bad-spec.yaml"


def _words(kind: str, case: str) -> list[str]:
    return (FIXTURE_CASES if kind == "fixture" else SPEC_CASES)[case][1]


@pytest.fixture(scope="module")
def cli_outcomes(tmp_path_factory) -> dict:
    """The CLI runs at once (each is mostly start-up time); one test per case reads its result."""
    root = tmp_path_factory.mktemp("bad-input")
    jobs = [("fixture", c, _fixture_case(root, c)) for c in CLI_FIXTURE_CASES]
    jobs += [("spec", c, _spec_case(root, c)) for c in CLI_SPEC_CASES]
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = {(kind, case): (pool.submit(afpbench, ["run", str(spec)], work), work)
                   for kind, case, (work, spec) in jobs}
    return {key: (f.result(), work) for key, (f, work) in futures.items()}


def _in_process_error(kind: str, case: str, root: Path) -> str:
    """The error `afpbench run` would print (after 'error: '), from the calls it makes before writing."""
    _, spec_path = (_fixture_case if kind == "fixture" else _spec_case)(root, case)
    with pytest.raises(FixtureError if kind == "fixture" else (SpecError, FixtureError)) as info:
        load_inputs(load_spec(spec_path))
    return str(info.value)


@pytest.mark.parametrize("case", list(FIXTURE_CASES))
def test_malformed_fixture_is_refused_naming_file_and_field(tmp_path, case):
    message = _in_process_error("fixture", case, tmp_path)
    assert _expected_name("fixture", case) in message, message
    assert all(w in message for w in _words("fixture", case)), message


@pytest.mark.parametrize("case", list(SPEC_CASES))
def test_malformed_spec_is_refused_naming_file_and_field(tmp_path, case):
    message = _in_process_error("spec", case, tmp_path)
    assert _expected_name("spec", case) in message, message
    assert all(w in message for w in _words("spec", case)), message


@pytest.mark.parametrize("kind_case", [("fixture", c) for c in CLI_FIXTURE_CASES] +
                         [("spec", c) for c in CLI_SPEC_CASES], ids=lambda kc: f"{kc[0]}-{kc[1]}")
def test_cli_refuses_bad_input_with_one_line_exit_2_and_no_rows(cli_outcomes, kind_case):
    proc, work = cli_outcomes[kind_case]
    line = one_line_error(proc)  # non-zero exit, one line on stderr, no traceback
    assert proc.returncode == 2, (proc.returncode, line)
    assert _expected_name(*kind_case) in line, line
    assert all(w in line for w in _words(*kind_case)), line
    assert row_count(work / "afpbench.db") == 0, "nothing is written for bad input"


def test_secrets_in_a_refused_spec_are_not_echoed(tmp_path, cli_outcomes):
    """The refusal names where the credential is, never the credential itself."""
    proc, _ = cli_outcomes[("spec", "literal-key-in-params")]
    assert "abc123" not in proc.stdout + proc.stderr
    for case, secret in (("literal-api-key", "sk-live-abc"), ("key-shaped-value", "sk-proj-abcdefghij0123456789")):
        assert secret not in _in_process_error("spec", case, tmp_path)


def test_a_50_mb_fixture_or_spec_is_refused_before_it_is_read(tmp_path):
    """Size cap (5 MB): refused from the file size (the message is the size check's), not parsed for
    minutes; the time bound only catches a hang, whatever the machine's load."""
    (tmp_path / "fx").mkdir()
    _write(tmp_path / "fx" / "P01.yaml", _big(P01))
    _write(tmp_path / "spec.yaml", _big(yaml.safe_dump({"judges": [], "models": [SIM]})))
    started = time.monotonic()
    with pytest.raises(FixtureError, match=r"P01\.yaml: file is 50\.0 MB, over the 5 MB limit"):
        load_fixtures(tmp_path / "fx")
    with pytest.raises(SpecError, match=r"spec\.yaml: file is 50\.0 MB, over the 5 MB limit"):
        load_spec(tmp_path / "spec.yaml")
    assert time.monotonic() - started < 30


def test_an_alias_bomb_is_refused_before_it_is_expanded(tmp_path):
    """12 levels x 12 aliases, about 9 x 10^12 nodes if walked (no end in sight); the expanded size is
    counted on the DAG. The time bound only catches that walk, whatever the machine's load."""
    (tmp_path / "fx").mkdir()
    _write(tmp_path / "fx" / "P01.yaml", _bomb(levels=12, width=12))
    started = time.monotonic()
    with pytest.raises(FixtureError, match="expands to more than 100000 nodes"):
        load_fixtures(tmp_path / "fx")
    assert time.monotonic() - started < 30


def test_yaml_anchors_within_limits_still_work_in_a_spec(tmp_path):
    """The limits refuse explosions, not YAML: a spec may reuse a block through an anchor."""
    spec = tmp_path / "s.yaml"
    spec.write_text("judges: []\nmodels:\n"
                    "  - {provider: sim, model: sim-1, limits: &l {requests_per_min: 60, burst: 2}}\n"
                    "  - {provider: sim, model: sim-2, limits: *l}\n")
    loaded = load_spec(spec)
    assert loaded.models[0].limits == loaded.models[1].limits
    assert loaded.models[1].limits.burst == 2


def test_a_spec_validated_directly_also_refuses_literal_credentials():
    """The HTTP API validates a posted spec with SweepSpec itself, not through parse_spec."""
    from pydantic import ValidationError

    from afpbench.workers.sweeps.spec import SweepSpec

    with pytest.raises(ValidationError, match=r"models\.0\.params\.token: looks like a literal credential"):
        SweepSpec.model_validate({"judges": [], "models": [{**SIM, "params": {"token": "t0k3n"}}]})
    with pytest.raises(ValidationError, match="AFP_API_TOKEN is afpbench's own secret"):
        SweepSpec.model_validate({"judges": [], "models": [{**SIM, "api_key_env": "AFP_API_TOKEN"}]})
