"""The shipped local-model example spec, pointed at the tier's server, and the CLI on it."""

from __future__ import annotations

import json
import os
import time
from importlib import resources
from pathlib import Path

from afpbench.scoring.states import ResultState
from afpbench.workers.localmodel.server import LocalServer
from tests.e2e.test_cli_errors import afpbench

EXAMPLE = "local-model.yaml"
EXAMPLE_BASE = "http://127.0.0.1:8080/v1"  # what `afpbench local-model serve` listens on by default
STATES = {s.value for s in ResultState}

# How much of the tier's sweeps runs. "full" (the default): the example as shipped, 10 cells embedded and
# 2 distributed, about 40 min on one CPU thread (each judge call reads a ~3,000-token prompt: 50-150 s).
# "ci" (.ci/run): the same pipeline on fewer cells and no parse retries (P08 x A, D embedded; P01 x A
# distributed), so the tier stays within CI's time; the shipped spec's P06 repeats are still checked.
SCOPE = os.environ.get("AFP_REALMODEL_SCOPE", "full")
CI_CUTS = {"repeats: 1": "repeats: 1\ndispute_rule: {max_parse_retries: 0}"}


def scoped(full: list[str], ci: list[str]) -> list[str]:
    """Subset options for `afpbench run` in this scope."""
    return ci if SCOPE == "ci" else full


def example_text() -> str:
    return resources.files("afpbench.reference").joinpath("specs", EXAMPLE).read_text(encoding="utf-8")


def example_spec(server: LocalServer, directory: Path, **replace: str) -> Path:
    """The example as shipped; only the port differs (the tier's server takes a free one, never 8080,
    which a user's own server may hold). `replace` swaps further exact lines (e.g. fewer fixtures)."""
    text = example_text()
    assert text.count(f"base_url: {EXAMPLE_BASE}") == 2, "the model and the judge are on the served base URL"
    assert f"model: {server.model_name}" in text, "the example names the alias the server answers to"
    text = text.replace(f"base_url: {EXAMPLE_BASE}", f"base_url: {server.base_url}")
    for old, new in replace.items():
        assert old in text, old
        text = text.replace(old, new)
    path = directory / EXAMPLE
    path.write_text(text, encoding="utf-8")
    return path


def run_cli(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 900):
    """`afpbench ARGS` (embedded mode on cwd/afpbench.db unless env says otherwise), timed."""
    started = time.monotonic()
    proc = afpbench(args, cwd, env=env, timeout=timeout)
    return proc, time.monotonic() - started


def cell_records(cwd: Path, sweep_id: str, env: dict[str, str] | None = None) -> list[dict]:
    listed, _ = run_cli(["cells", sweep_id, "--json"], cwd, env)
    assert listed.returncode == 0, listed.stderr
    records = []
    for cell in json.loads(listed.stdout):
        shown, _ = run_cli(["show", str(cell["id"]), "--json"], cwd, env)
        assert shown.returncode == 0, shown.stderr
        records.append(json.loads(shown.stdout))
    return records


def assert_real_record(record: dict, server: LocalServer) -> None:
    """The run record of an answered cell from the real server: the protocol's fields, filled."""
    where = f"cell {record['cell_id']} ({record['fixture_id']} {record['condition']} r{record['repeat']})"
    assert record["result_state"] in STATES, where
    assert record["simulated"] == {"model_output": False, "grading": False, "sweep": False}, where
    answered = [a for a in record["attempts"] if a["output_text"] is not None]
    assert answered, f"{where}: no answered attempt: {record['attempts']}"
    last = answered[-1]
    assert last["served_model"], f"{where}: no served model"
    assert last["tokens"]["input"] and last["tokens"]["output"], f"{where}: no usage: {last['tokens']}"
    assert last["latency_ms"] and last["latency_ms"] > 0, where
    first = last["rounds"][0]
    sent = first["request"]
    assert sent["url"].startswith(server.base_url), sent
    body = sent["json"]
    assert body["max_tokens"] == 320 and body["messages"], f"{where}: the request as sent: {body}"
    # The record keeps each raw body once, in raw_output.raw_bodies; the round points there.
    bodies = record["raw_output"]["raw_bodies"]
    assert bodies and bodies[0] and '"choices"' in bodies[0], f"{where}: raw body: {bodies[:1]}"
    assert first["raw_body"] == "(raw_output.raw_bodies[0])", first["raw_body"][:200]
    assert record["raw_output"]["text"] == last["output_text"], where
