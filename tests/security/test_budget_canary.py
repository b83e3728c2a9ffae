"""The canary search with UTF-16 and NUL echoes of the key (issue #15, item 5 and the acceptance).

A distributed run (real `afpbench worker` at DEBUG on Redis, PostgreSQL, Flower watching) against a
stdlib server that echoes the key it receives in forms a plain substring search misses: whole UTF-16
LE and BE bodies (with and without a BOM), the key with NULs between its characters (JSON-escaped and
raw), JSON `\\uXXXX` escapes, and undecodable bytes around it. Then the database (pg_dump), the worker's
DEBUG log, command output, Flower's task API, the export bundle and the reports are searched for the
key in every form: as is, UTF-16 LE/BE, with NUL / U+FFFD / escape separators removed, JSON escapes
undone, and inside every base64 run (the exact bytes of a body are stored base64). Rule: 0 hits.
Before, a UTF-16 error body passed both masking layers and the key landed in worker logs and Flower.
"""

from __future__ import annotations

import base64
import codecs
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg
import pytest
import requests

from tests.conftest import PG_ADMIN_URL, REPO, need
from tests.faults import fault_server as fs
from tests.faults.harness import http_model
from tests.integration.test_flower import flower, hears_flower
from tests.serving import free_port

KEY_SHAPED = f"sk-canary-{uuid.uuid4()}"
KEY_PLAIN = f"canary{uuid.uuid4().hex}"
API_TOKEN = f"{uuid.uuid4().hex}-afp-token-canary"
FLOWER_PASSWORD = f"flower{uuid.uuid4().hex}"
CANARIES = {"shaped key": KEY_SHAPED, "plain key": KEY_PLAIN, "API token": API_TOKEN}


def _key(h: fs.Handler) -> str:
    return (h.headers.get("Authorization") or "").removeprefix("Bearer ")


def _interleaved(text: str) -> str:
    return "\x00".join(text)


def _escaped(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in text)


def utf16_error(status: int, encoding: str, bom: bytes = b"") -> fs.Behaviour:
    def run(h: fs.Handler, n: int, req: dict) -> None:
        body = json.dumps({"error": {"message": f"Rejected: Authorization: Bearer {_key(h)} (key {_key(h)})",
                                     "code": f"c{status}"}})
        h.send_json(status, bom + body.encode(encoding), {"Content-Type": f"application/json; charset={encoding}"})
    return run


def interleaved_answer(h: fs.Handler, n: int, req: dict) -> None:
    """A 200 whose answer, model name and id carry the key with NULs between its characters."""
    hidden = _interleaved(_key(h))
    body = fs.completion(f"[fault-server] simulated echo: {hidden} and Bearer {hidden}.", model=f"m-{hidden}",
                         request_id=f"id-{hidden}")
    h.send_json(200, body)


def utf16_answer(h: fs.Handler, n: int, req: dict) -> None:
    """A 200 answer whose whole body is UTF-16 LE and whose text is the key."""
    body = json.dumps(fs.completion(f"[fault-server] simulated echo: your key is {_key(h)}."))
    h.send_json(200, body.encode("utf-16-le"))


def raw_nul_error(h: fs.Handler, n: int, req: dict) -> None:
    """A proxy's 502 page that is not valid UTF-8, with the key NUL-interleaved and in UTF-16 BE."""
    key = _key(h)
    body = (b"<html>\xff\xfe proxy error: " + _interleaved(key).encode() + b" \xc3(" + key.encode("utf-16-be")
            + b") Bearer " + _interleaved(key).encode() + b"</html>")
    h.send_json(502, body, {"Content-Type": "text/html"})


def escaped_429(h: fs.Handler, n: int, req: dict) -> None:
    """A 429 whose JSON spells the key in \\u escapes, so the text holds no key until it is parsed."""
    body = '{"error": {"message": "slow down, ' + _escaped(_key(h)) + '", "code": "rate_limit_exceeded"}}'
    h.send_json(429, body, {"Retry-After": "0.1"})


ROUTES = {
    "u16le-500": (utf16_error(500, "utf-16-le"), "AFP_CANARY_PLAIN"),
    "u16be-bom-401": (utf16_error(401, "utf-16-be", codecs.BOM_UTF16_BE), "AFP_CANARY_SHAPED"),
    "u16le-bom-503": (utf16_error(503, "utf-16-le", codecs.BOM_UTF16_LE), "AFP_CANARY_SHAPED"),
    "nul-answer": (interleaved_answer, "AFP_CANARY_PLAIN"),
    "nul-answer-shaped": (interleaved_answer, "AFP_CANARY_SHAPED"),
    "u16-answer": (utf16_answer, "AFP_CANARY_PLAIN"),
    "raw-nul-502": (raw_nul_error, "AFP_CANARY_PLAIN"),
    "escaped-429": (fs.first(1, escaped_429), "AFP_CANARY_PLAIN"),
}

# --- the search ---------------------------------------------------------------------------------

# What may have been put between a secret's characters on its way into storage or a log line.
_SEPARATORS = re.compile(rb"\x00|\xef\xbf\xbd|\\+u0000|\\+x00|\\+ufffd", re.IGNORECASE)
_ESCAPE = re.compile(rb"\\+u([0-9a-fA-F]{4})")
_BASE64 = re.compile(rb"[A-Za-z0-9+/]{16,}={0,2}")


def _unescape(data: bytes) -> bytes:
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)).encode("utf-8", "surrogatepass"), data)


def _readings(data: bytes, depth: int = 0) -> list[bytes]:
    out = [data, _SEPARATORS.sub(b"", data), _SEPARATORS.sub(b"", _unescape(data))]
    if depth == 0:
        for run in _BASE64.findall(data):
            try:
                decoded = base64.b64decode(run[: len(run) // 4 * 4])
            except ValueError:
                continue
            out += _readings(decoded, 1)
    return out


def leaks(data: bytes) -> list[str]:
    """Canaries found in `data` in any form, whole or as a 16-character prefix (a cut key still leaks)."""
    found = set()
    readings = _readings(data)
    for name, secret in CANARIES.items():
        for form in (secret, secret[:16]):
            for encoded in (form.encode(), form.encode("utf-16-le"), form.encode("utf-16-be")):
                if any(encoded in r for r in readings):
                    found.add(f"{name} ({'whole' if form == secret else 'prefix'})")
    return sorted(found)


def test_the_search_finds_every_form_it_looks_for():
    """The search itself, so that a 0 below means something: every echo form of the key is found."""
    key = KEY_PLAIN
    forms = [key.encode(), key.encode("utf-16-le"), codecs.BOM_UTF16_BE + key.encode("utf-16-be"),
             json.dumps(_interleaved(key)).encode(), _interleaved(key).encode(), repr(_interleaved(key)).encode(),
             "\ufffd".join(key).encode(), _escaped(key).encode(), json.dumps(_escaped(key)).encode(),
             base64.b64encode(b"x" + key.encode("utf-16-le")), base64.b64encode(_interleaved(key).encode())]
    for form in forms:
        assert leaks(b"<<" + form + b">>") == ["plain key (prefix)", "plain key (whole)"], form
    assert leaks(b"cut: " + key[:16].encode() + b"...") == ["plain key (prefix)"]
    assert leaks(b"masked: *** and \x00*\x00*\x00* and Bearer ***") == []


# --- the run ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def canary_run(tmp_path_factory, redis_url):
    import redis

    tmp = tmp_path_factory.mktemp("canary16")
    name = f"afptest_{uuid.uuid4().hex[:10]}"
    try:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=3) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    except Exception as exc:  # noqa: BLE001
        need("PostgreSQL", str(exc))
    redis.Redis.from_url(redis_url).flushdb()
    pg_url = PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    env = {
        **os.environ, "PYTHONUNBUFFERED": "1",
        "AFP_DATABASE_URL": pg_url.replace("postgresql://", "postgresql+psycopg://"), "AFP_BROKER_URL": redis_url,
        "AFP_CANARY_SHAPED": KEY_SHAPED, "AFP_CANARY_PLAIN": KEY_PLAIN, "AFP_API_TOKEN": API_TOKEN,
        "AFP_LOG_LEVEL": "DEBUG", "AFP_MAX_ATTEMPTS": "2",
        "AFP_FLOWER_USER": "ops", "AFP_FLOWER_PASSWORD": FLOWER_PASSWORD,
    }
    out: dict[str, bytes] = {}
    try:
        with fs.FaultServer({route: behaviour for route, (behaviour, _) in ROUTES.items()}) as server, \
                flower(env, free_port(), tmp / "flower.log") as flower_base, _worker(env, tmp / "worker.log"):
            auth = ("ops", FLOWER_PASSWORD)
            _wait_for(lambda: requests.get(f"{flower_base}/api/workers", params={"refresh": "1"}, auth=auth,
                                           timeout=20).json(), "flower sees the worker")
            _wait_for(lambda: hears_flower(tmp / "worker.log"), "the worker sends task events (Flower asked)")
            models = [http_model(route, server.base_url(route), api_key_env=var) for route, (_, var) in ROUTES.items()]
            spec = {"name": "canary utf-16", "models": models, "judges": [], "fixtures": {"only": ["P01"]},
                    "conditions": ["A"]}
            (tmp / "spec.json").write_text(json.dumps(spec))
            try:
                run = _cli(["run", str(tmp / "spec.json"), "--json"], env, timeout=120)
                out["run output"] = (run.stdout + run.stderr).encode()
                out["run exit"] = str(run.returncode).encode()
                # 3: cells ended INFRA_ERROR (the echoing error routes), which is not the model's output.
                summary = json.loads(run.stdout) if run.returncode in (0, 3) else {}
            except subprocess.TimeoutExpired as exc:
                # Before the fix the poison cells never finished; what leaked meanwhile is searched anyway.
                out["run output"] = b"".join(_bytes(part) for part in (exc.stdout, exc.stderr))
                out["run exit"] = b"timed out"
                summary = {}
            sweep_id = summary.get("sweep_id")
            seen = {s.authorization for s in server.httpd.seen}
            assert {f"Bearer {KEY_SHAPED}", f"Bearer {KEY_PLAIN}"} <= seen, "the canaries were in use"

            def tasks() -> list[dict]:
                return list(requests.get(f"{flower_base}/api/tasks", auth=auth, timeout=20).json().values())

            flower_tasks = _wait_for(lambda: [t for t in tasks() if t.get("name") == "afpbench.execute"
                                              and t.get("state") == "SUCCESS"] and tasks(), "flower lists tasks", 30)
            out["flower /api/tasks"] = json.dumps(flower_tasks).encode()
        out["worker log (DEBUG)"] = (tmp / "worker.log").read_bytes()
        out["flower log"] = (tmp / "flower.log").read_bytes()
        for fmt in ("html", "md", "json") if sweep_id else ():
            report = _cli(["report", sweep_id, "--format", fmt], env)
            assert report.returncode == 0, report.stderr
            out[f"report {fmt}"] = (report.stdout + report.stderr).encode()
        if sweep_id:
            export = _cli(["export", sweep_id, str(tmp / "bundle")], env)
            assert export.returncode == 0, export.stderr
            out["export output"] = (export.stdout + export.stderr).encode()
        for path in (tmp / "bundle").rglob("*"):
            if path.is_file():
                out[f"bundle {path.name}"] = path.read_bytes()
        dump = subprocess.run(["pg_dump", "--data-only", "--no-owner", pg_url], capture_output=True, timeout=60)
        assert dump.returncode == 0, dump.stderr
        out["pg_dump"] = dump.stdout
        with psycopg.connect(pg_url) as conn:
            rows = {
                "cells": conn.execute("select model_label, state, state_reason from cell").fetchall(),
                "attempts": conn.execute("select c.model_label, a.outcome, a.error, a.output_text, a.served_model, "
                                         "a.rounds from attempt a join cell c on c.id = a.cell_id "
                                         "order by a.cell_id, a.number").fetchall(),
                "notices": conn.execute("select notices from sweep").fetchone()[0],
            }
        yield out, rows
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _bytes(part: bytes | str | None) -> bytes:
    return part.encode() if isinstance(part, str) else part or b""


def _cli(args: list[str], env: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "afpbench.api.cli", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _wait_for(fetch, what: str, timeout_s: float = 60.0):
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = fetch()
        except (requests.RequestException, ValueError):
            value = None
        if value:
            return value
        assert time.monotonic() < deadline, f"gave up waiting: {what}"
        time.sleep(0.5)


class _worker:
    """One real `afpbench worker` logging at DEBUG (SQL statements and their parameters included)."""

    def __init__(self, env: dict, log_path: Path):
        self.env, self.log_path = env, log_path

    def __enter__(self):
        self.log = open(self.log_path, "wb")  # noqa: SIM115 - closed in __exit__
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "afpbench.api.cli", "worker", "--concurrency=4", "--hostname=canary16@%h",
             "--pool=threads", "--loglevel=DEBUG"],
            cwd=REPO, env=self.env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        return self.proc

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.log.close()


# --- the checks ---------------------------------------------------------------------------------


def test_the_run_finished_within_the_budget(canary_run):
    """Rule: echoes in any encoding are stored, so the sweep completes instead of looping (exit 3: the
    error routes' cells end INFRA_ERROR, a reason outside the model's output)."""
    out, rows = canary_run
    assert out["run exit"] == b"3", out["run output"][-2000:]
    assert all(state for _, state, _ in rows["cells"])


@pytest.mark.parametrize("place", ["pg_dump", "worker log (DEBUG)", "flower /api/tasks", "run output",
                                   "report html", "report md", "report json", "export output"])
def test_no_canary_in_any_form(canary_run, place):
    """Rule: with UTF-16 and NUL echoes, 0 hits in the database, DEBUG logs, Flower, output and reports."""
    out, _ = canary_run
    assert leaks(out.get(place, b"")) == [], place
    assert len(out.get(place, b"")) > 50, f"{place}: nothing to search"


def test_no_canary_in_the_export_bundle(canary_run):
    """Rule: every file of the export bundle, raw outputs with their exact bytes included, holds 0 hits."""
    out, _ = canary_run
    files = {k: v for k, v in out.items() if k.startswith("bundle ")}
    for name, data in files.items():
        assert leaks(data) == [], name
    assert b"raw_body_b64" in files["bundle raw_outputs.jsonl"], "the exact bytes were exported and searched"


def test_the_worker_log_really_is_at_debug_and_flower_saw_the_tasks(canary_run):
    """Not vacuous: the worker logged at DEBUG while it called every echoing route, and Flower listed
    the execute tasks with their arguments and results."""
    out, _ = canary_run
    log = out["worker log (DEBUG)"]
    assert b"DEBUG:urllib3.connectionpool" in log and b"succeeded in" in log
    assert all(f'"POST /{route}/v1/chat/completions HTTP/1.1"'.encode() in log for route in ROUTES)
    tasks = json.loads(out["flower /api/tasks"])
    assert {t["name"] for t in tasks} >= {"afpbench.execute"} and any(t.get("result") for t in tasks)


def test_the_echoes_were_stored_masked_and_exact(canary_run):
    """Not vacuous: the echoes reached storage, with the key masked in the text and in the exact bytes."""
    _, rows = canary_run
    attempts: dict[str, list] = {}
    for label, outcome, error, text, served, rounds in rows["attempts"]:
        attempts.setdefault(label, []).append((outcome, error, text, served, rounds))
    for route in ("u16le-500", "u16le-bom-503"):
        assert all(a[0] == "infra_error" and "Authorization: Bearer *** (key ***)" in a[1] for a in attempts[route])
        raw = base64.b64decode(attempts[route][0][4][0]["raw_body_b64"])
        assert "Bearer *** (key ***)".encode("utf-16-le") in raw, "the exact UTF-16 bytes, masked in UTF-16"
    ((outcome, error, _, _, _),) = attempts["u16be-bom-401"]
    assert outcome == "auth_error" and "Bearer *** (key ***)" in error
    assert any(n.startswith("model u16be-bom-401 stopped") and "***" in n for n in rows["notices"])
    for route in ("nul-answer", "nul-answer-shaped"):
        ((outcome, _, text, served, _),) = attempts[route]
        assert outcome == "answer" and text == "[fault-server] simulated echo: *** and Bearer ***.", text
        assert served == "m-***"
    ((outcome, _, text, _, rounds),) = attempts["u16-answer"]
    assert outcome == "answer" and text == "[fault-server] simulated echo: your key is ***."
    assert "your key is ***".encode("utf-16-le") in base64.b64decode(rounds[0]["raw_body_b64"])
    assert all(a[0] == "infra_error" and "proxy error" in a[4][0]["raw_body"] for a in attempts["raw-nul-502"])
    assert [a[0] for a in attempts["escaped-429"]] == ["rate_limited", "answer"]
    assert "slow down, ***" in attempts["escaped-429"][0][1]
