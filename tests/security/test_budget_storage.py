"""Any bytes can be stored (issue #15, item 5): a poison answer on PostgreSQL no longer loops for ever.

Rules checked:
- A response holding a NUL (escaped or raw), a lone surrogate, invalid UTF-8, or a UTF-16 body is
  stored, and the sweep completes within AFP_MAX_ATTEMPTS attempts per cell. (Before: a NUL in the
  answer made the attempt write fail on PostgreSQL; the cell was tried as long as workers ran.)
- The stored text replaces only what PostgreSQL cannot hold (U+FFFD), and the round keeps the exact
  bytes the server sent (`raw_body_b64`) whenever the text is not them.

Sweeps run through `afpbench run` (embedded broker) on a real PostgreSQL database, against a stdlib
HTTP server; rows are read back with psycopg, not through afpbench.
"""

from __future__ import annotations

import base64
import json

import psycopg
import pytest

from tests.e2e.test_cli_errors import afpbench
from tests.faults import fault_server as fs
from tests.faults.harness import http_model

MAX_ATTEMPTS = 3
POISON_TEXT = "[fault-server] simulated answer. A NUL:\x00 and a lone surrogate:\ud800 - the rest survives."
BODIES = {
    # JSON escapes: json.loads turns them into a real NUL and a lone surrogate in the answer text.
    "nul-escaped": json.dumps(fs.completion(POISON_TEXT)).encode(),
    # A raw NUL byte inside a JSON string: not valid JSON, so the attempt is an infra_error (retried).
    "nul-raw": json.dumps(fs.completion("raw NUL here: @")).encode().replace(b"@", b"\x00"),
    # Bytes that are not UTF-8 inside the answer.
    "invalid-utf8": json.dumps(fs.completion("bad bytes: @ end")).encode().replace(b"@", b"\xff\xfe\xc3"),
    # A whole body in UTF-16 (no BOM): decoded by its NUL layout, so it is read as the answer it is.
    "utf16-body": json.dumps(fs.completion("an answer sent as UTF-16")).encode("utf-16-le"),
}


def _pg(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


@pytest.fixture(scope="module")
def poison_run(tmp_path_factory):
    """One sweep with a model per poison body; returns (exit status, stderr, cells, attempts)."""
    import uuid

    from tests.conftest import PG_ADMIN_URL, need

    name = f"afptest_{uuid.uuid4().hex[:10]}"
    try:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=3) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    except Exception as exc:  # noqa: BLE001
        need("PostgreSQL", str(exc))
    url = PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    tmp = tmp_path_factory.mktemp("poison")
    try:
        with fs.FaultServer({route: fs.raw(body) for route, body in BODIES.items()}) as server:
            spec = {"name": "poison", "judges": [], "fixtures": {"only": ["P01"]}, "conditions": ["A"],
                    "models": [http_model(route, server.base_url(route)) for route in BODIES]}
            (tmp / "spec.json").write_text(json.dumps(spec))
            # Before the fix this never finished: the cell with the NUL was retried as long as the run lasted.
            proc = afpbench(["run", str(tmp / "spec.json"), "--json", "--threads", "4"], tmp, timeout=150, env={
                "AFP_DATABASE_URL": url.replace("postgresql://", "postgresql+psycopg://"),
                "AFP_MAX_ATTEMPTS": str(MAX_ATTEMPTS),
            })
            requests = {route: len(server.requests_for(route)) for route in BODIES}
        with psycopg.connect(url) as conn:
            cells = {r[0]: r[1:] for r in conn.execute(
                "select model_label, phase, state, state_reason, attempts, id from cell")}
            attempts = {}
            for label, row in cells.items():
                attempts[label] = conn.execute(
                    "select number, outcome, output_text, rounds from attempt where cell_id = %s order by number",
                    (row[-1],)).fetchall()
        yield proc, cells, attempts, requests
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_the_nul_poison_answer_on_postgresql_is_stored_and_the_sweep_completes(poison_run):
    """Rule: every byte a provider sends can be stored; a poison answer costs at most the budget."""
    proc, cells, attempts, requests = poison_run
    # The raw-NUL body is malformed JSON: that cell ends INFRA_ERROR, so the run exits 3 (not the model's output).
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["done"] == len(BODIES)
    for label, (phase, state, reason, count, _) in cells.items():
        assert phase == "done" and state, (label, reason)
        assert count == len(attempts[label]) == requests[label] <= MAX_ATTEMPTS, label
        assert not [a for a in attempts[label] if a[1] in ("started", "interrupted")], label
    (answer,) = attempts["nul-escaped"]
    assert answer[1] == "answer" and cells["nul-escaped"][1] == "GRADER_DISPUTE"
    assert answer[2] == POISON_TEXT.replace("\x00", "\ufffd").replace("\ud800", "\ufffd")
    assert [a[1] for a in attempts["nul-raw"]] == ["infra_error"] * MAX_ATTEMPTS
    assert "after 3 attempts" in cells["nul-raw"][2]


@pytest.mark.parametrize("route", list(BODIES))
def test_the_round_keeps_the_exact_bytes_beside_a_readable_text(poison_run, route):
    """Rule: the stored record is lossless: raw_body_b64 is exactly what the server sent whenever the
    text (NULs and undecodable bytes replaced by U+FFFD) is not."""
    _, _, attempts, _ = poison_run
    for _, _, _, rounds in attempts[route]:
        (round_,) = rounds
        exact = round_["raw_body"].encode() if route == "nul-escaped" else base64.b64decode(round_["raw_body_b64"])
        assert exact == BODIES[route]
        assert "\x00" not in round_["raw_body"]
        # JSON escapes are text: that body is valid UTF-8 without a NUL byte, so its text is exact.
        assert ("raw_body_b64" in round_) == (route != "nul-escaped")
    shown = attempts[route][0][3][0]["raw_body"]
    expected = {"nul-escaped": "A NUL:\\u0000 and a lone surrogate:\\ud800", "nul-raw": "raw NUL here: \ufffd",
                "invalid-utf8": "bad bytes: \ufffd", "utf16-body": '"content": "an answer sent as UTF-16"'}
    assert expected[route] in shown


def test_a_clean_body_is_stored_once_as_text(tmp_path):
    """Not vacuous, and no bloat: a body that is valid UTF-8 without NULs needs no second copy."""
    with fs.FaultServer({"ok": fs.answer()}) as server:
        spec = {"name": "clean", "judges": [], "fixtures": {"only": ["P01"]}, "conditions": ["A"],
                "models": [http_model("ok", server.base_url("ok"))]}
        (tmp_path / "spec.json").write_text(json.dumps(spec))
        proc = afpbench(["run", str(tmp_path / "spec.json"), "--json"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    import sqlite3

    con = sqlite3.connect(tmp_path / "afpbench.db")
    (rounds,) = con.execute("select rounds from attempt").fetchone()
    con.close()
    (round_,) = json.loads(rounds)
    assert "raw_body_b64" not in round_ and json.loads(round_["raw_body"])["object"] == "chat.completion"
