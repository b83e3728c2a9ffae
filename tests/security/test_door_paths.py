"""Specs from the API are data only (issue #15, item 1): a posted spec cannot make the server read its
own files; inputs come inline or by name from the operator's catalogue and are sealed by their text.
The CLI keeps file paths, read next to the spec file and confined when AFP_CATALOGUE_DIR is set.

Replayed against a real `afpbench serve` process with a token."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import requests
import yaml

from afpbench.fixtures.loader import read_fixture_files
from afpbench.reference.hashing import text_sha256
from afpbench.reference.loader import load_instructions, load_judge_prompt
from tests.conftest import REPO
from tests.security.door_harness import AUTH, SIM, TOKEN, cli, one_line_error, row_count, serve_env, serving

pytestmark = pytest.mark.integration

PILOT = REPO / "fixtures" / "pilot"
INSTRUCTIONS = load_instructions()
JUDGE_PROMPT = load_judge_prompt()


def _fixture_data(name: str) -> dict:
    text = next(f.text for f in read_fixture_files(None) if f.name == name)
    return json.loads(json.dumps(yaml.safe_load(text), default=str))  # dates as the JSON strings a client sends


def _spec(**overrides) -> dict:
    return {"name": "door (simulated)", "models": [SIM], "judges": [], "conditions": ["A"],
            "fixtures": {"only": ["P01"]}, **overrides}


@pytest.fixture(scope="module")
def catalogue(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("catalogue")
    pair = root / "fixtures" / "pair"
    pair.mkdir(parents=True)
    for f in read_fixture_files(None):
        if f.name in ("P01.yaml", "P02.yaml"):
            (pair / f.name).write_text(f.text, encoding="utf-8")
    plain = root / "instructions" / "plain"
    plain.mkdir(parents=True)
    for c in "BCD":
        (plain / f"{c}.md").write_text(INSTRUCTIONS.text(c), encoding="utf-8")
    (plain / "manifest.yaml").write_text("version: plain-1\n", encoding="utf-8")
    (root / "judge_prompts").mkdir()
    (root / "judge_prompts" / "strict.md").write_text(JUDGE_PROMPT + "Be strict.\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def served(tmp_path_factory, catalogue):
    tmp = tmp_path_factory.mktemp("serve-paths")
    with serving(serve_env(tmp, AFP_CATALOGUE_DIR=str(catalogue)), tmp / "serve.log") as server:
        server.db = tmp / "door.db"
        yield server


def _post(served, body: dict) -> requests.Response:
    return requests.post(f"{served.base}/sweeps", json=body, headers=AUTH, timeout=60)


def _sweeps(served) -> int:
    return requests.get(f"{served.base}/sweeps", headers=AUTH, timeout=10).json()["total"]


def _stored(served, sweep_id: str) -> tuple[dict, dict, dict]:
    con = sqlite3.connect(served.db)
    try:
        spec, inputs, seal = con.execute(
            "select spec, inputs, seal_components from sweep where id = ?", (sweep_id,)).fetchone()
    finally:
        con.close()
    return json.loads(spec), json.loads(inputs), json.loads(seal)


def _fixture_texts(served, sweep_id: str) -> dict[str, str]:
    """The sweep's stored fixture texts by file name, in file order (its sweep_fixture rows)."""
    con = sqlite3.connect(served.db)
    try:
        return dict(con.execute("select name, text from sweep_fixture where sweep_id = ? order by position",
                                (sweep_id,)).fetchall())
    finally:
        con.close()


def test_a_judge_prompt_naming_a_server_file_is_refused_and_nothing_is_read(served):
    """Rule: a posted spec may not name server paths. `judge_prompt: /proc/self/environ` once sent the
    server's environment (token, passwords, keys) to the client's judge and stored it; now it is a 422
    naming the field, nothing is written and nothing of the environment comes back."""
    before = _sweeps(served)
    for path in ("/proc/self/environ", "judge_prompt.md", "../../../../proc/self/environ"):
        response = _post(served, _spec(judge_prompt=path))
        assert response.status_code == 422, response.text
        detail = response.json()["detail"]
        assert detail[0]["loc"] == ["body", "judge_prompt"] and "server path" in detail[0]["msg"], detail
        assert TOKEN not in response.text and "AFP_DATABASE_URL" not in response.text
    assert _sweeps(served) == before


def test_fixture_and_instruction_directories_on_the_server_are_refused(served):
    """Rule: `fixtures.dir` and `instructions.dir` in a posted spec are 422s naming the field (they used
    to read any server directory, e.g. the installed pilot set); catalogue names cannot climb out."""
    before = _sweeps(served)
    cases = [
        (_spec(fixtures={"dir": str(PILOT), "only": ["P01"]}), ["body", "fixtures", "dir"]),
        (_spec(instructions={"dir": str(REPO / "reference" / "instructions")}), ["body", "instructions", "dir"]),
        (_spec(fixtures={"name": "../../etc"}), ["body", "fixtures", "name"]),
        (_spec(instructions={"name": ".."}), ["body", "instructions", "name"]),
        (_spec(judge_prompt={"name": "../judge_prompts/strict"}), ["body", "judge_prompt", "name"]),
    ]
    for body, loc in cases:
        response = _post(served, body)
        assert response.status_code == 422, (body, response.text)
        assert response.json()["detail"][0]["loc"] == loc, response.text
    assert _sweeps(served) == before
    # The packaged defaults stay allowed: `dir: null` is no path.
    ok = _post(served, _spec(fixtures={"dir": None, "only": ["P01"]}, instructions={"dir": None}))
    assert ok.status_code == 201, ok.text


def test_inline_inputs_are_stored_and_sealed_by_their_text(served):
    """Rule: inline inputs are sealed exactly like file inputs. The fixture is stored as the file it
    becomes (inline-0.yaml) and its text, each instruction text and the judge prompt are in the seal;
    one changed character changes the seal."""
    texts = {c: INSTRUCTIONS.text(c) for c in "BCD"}
    prompt = JUDGE_PROMPT + "Score strictly.\n"
    body = _spec(fixtures={"inline": [_fixture_data("P01.yaml")]},
                 instructions={"inline": texts, "version": "inline-1"}, judge_prompt={"inline": prompt})
    created = _post(served, body)
    assert created.status_code == 201, created.text
    assert created.json()["cells"] == 1
    spec, inputs, seal = _stored(served, created.json()["id"])
    files = _fixture_texts(served, created.json()["id"])
    assert list(files) == ["inline-0.yaml"]
    stored_text = files["inline-0.yaml"]
    assert yaml.safe_load(stored_text)["id"] == "P01"
    assert seal["fixtures"] == {"inline-0.yaml": text_sha256(stored_text)}
    assert seal["instructions"]["version"] == "inline-1"
    assert seal["instructions"]["B"] == text_sha256(texts["B"]) and seal["instructions"]["A"] == text_sha256("")
    assert inputs["judge_prompt"] == prompt and seal["judge_prompt"] == text_sha256(prompt)
    assert spec["judge_prompt"] == {"name": None, "inline": prompt}
    changed = _post(served, {**body, "judge_prompt": {"inline": prompt.replace("strictly", "strictly!")}})
    assert changed.status_code == 201 and changed.json()["seal"] != created.json()["seal"]
    # Inline text no file could hold is refused, naming the field.
    bad = _post(served, _spec(instructions={"inline": {**texts, "C": "a\u0000b"}}))
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"][:3] == ["body", "instructions", "inline"], bad.text
    empty = _post(served, _spec(instructions={"inline": {**texts, "D": "  \n"}}))
    assert empty.status_code == 422 and empty.json()["detail"][0]["loc"] == ["body", "instructions", "inline"]
    assert "inline.D" in empty.text, empty.text


def test_catalogue_entries_are_read_by_name_and_sealed(served, catalogue):
    """Rule: inputs by name come from the operator's AFP_CATALOGUE_DIR (fixtures/<name>/,
    instructions/<name>/, judge_prompts/<name>.md) and are sealed by their text; an unknown name is a 422
    listing the known ones, never a path."""
    body = _spec(fixtures={"name": "pair", "only": ["P02"]}, instructions={"name": "plain"},
                 judge_prompt={"name": "strict"})
    created = _post(served, body)
    assert created.status_code == 201, created.text
    _spec_json, inputs, seal = _stored(served, created.json()["id"])
    p02 = (catalogue / "fixtures" / "pair" / "P02.yaml").read_text(encoding="utf-8")
    assert _fixture_texts(served, created.json()["id"]) == {"P02.yaml": p02}
    assert seal["fixtures"] == {"P02.yaml": text_sha256(p02)}
    assert inputs["instructions"]["name"] == "catalogue:plain" and seal["instructions"]["version"] == "plain-1"
    assert seal["judge_prompt"] == text_sha256((catalogue / "judge_prompts" / "strict.md").read_text())
    unknown = _post(served, _spec(fixtures={"name": "nope"}))
    assert unknown.status_code == 422 and "known: pair" in unknown.text, unknown.text
    assert str(catalogue) not in unknown.text, "a catalogue error does not tell the client where it lives"


def _write(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_cli_paths_are_read_next_to_the_spec_file(tmp_path, monkeypatch):
    """Rule: relative paths in a spec file resolve against the spec file's directory, not the cwd, and
    are stored absolute (so verify/resume read the same files from anywhere)."""
    from afpbench.workers.sweeps.inputs import load_inputs
    from afpbench.workers.sweeps.spec_loading import load_spec

    specs = tmp_path / "specs"
    (specs / "fx").mkdir(parents=True)
    (specs / "fx" / "P01.yaml").write_text((PILOT / "P01.yaml").read_text(), encoding="utf-8")
    (specs / "judge.md").write_text("Grade the response against the rubric. Reply in JSON.\n", encoding="utf-8")
    spec_file = _write(specs / "s.yaml", _spec(fixtures={"dir": "fx"}, judge_prompt="judge.md"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    spec = load_spec(spec_file)
    assert spec.fixtures.dir == str((specs / "fx").resolve())
    assert spec.judge_prompt == str((specs / "judge.md").resolve())
    inputs = load_inputs(spec)
    assert list(inputs.fixtures) == ["P01"] and inputs.judge_prompt.startswith("Grade the response")


def test_cli_paths_outside_the_allowed_roots_are_refused_when_a_catalogue_is_set(tmp_path, settings_env):
    """Rule: with AFP_CATALOGUE_DIR set, a spec file's paths must resolve inside the spec file's
    directory or the catalogue (symbolic links followed): one line naming the field and the setting,
    exit 2, nothing written."""
    catalogue = tmp_path / "catalogue"
    (catalogue / "fixtures" / "mine").mkdir(parents=True)
    (catalogue / "fixtures" / "mine" / "P01.yaml").write_text((PILOT / "P01.yaml").read_text(), encoding="utf-8")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "judge.md").write_text("Grade it.\n", encoding="utf-8")
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "link.md").symlink_to(outside / "judge.md")
    env = {"AFP_CATALOGUE_DIR": str(catalogue)}
    for field, overrides in (("judge_prompt", {"judge_prompt": "../outside/judge.md"}),
                             ("judge_prompt", {"judge_prompt": "link.md"}),
                             ("fixtures.dir", {"fixtures": {"dir": str(outside)}}),
                             ("instructions.dir", {"instructions": {"dir": "/etc"}})):
        spec_file = _write(specs / "s.yaml", _spec(**overrides))
        line = one_line_error(cli(["run", str(spec_file)], tmp_path, env=env))
        assert f"{field}:" in line and "outside the allowed roots" in line and "AFP_CATALOGUE_DIR" in line, line
        assert row_count(tmp_path / "afpbench.db") == 0
    from afpbench.workers.sweeps.spec_loading import load_spec

    settings_env(**env)
    inside = _write(specs / "s.yaml", _spec(fixtures={"dir": str(catalogue / "fixtures" / "mine")},
                                            judge_prompt="../catalogue/judge.md"))
    spec = load_spec(inside)  # the catalogue is an allowed root too
    assert spec.fixtures.dir == str((catalogue / "fixtures" / "mine").resolve())
