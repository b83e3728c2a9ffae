"""A key echoed base64- or hex-encoded never surfaces (issue #38, item 5 and the acceptance).

A stdlib server echoes the key it receives encoded: base64 of the key alone, of "Bearer <key>" (two
other byte alignments), URL-safe base64, and hex in both cases, in an answer's text, its model name
and id, a kept response header, an error body and a judge's reply. After an embedded sweep (DEBUG
logs), `report`, `export`, and a real `afpbench serve` read over every API read route and every viewer
page of the sweep, the key is searched for in each place as text and inside every base64 and hex run,
decoded at every start: 0 hits. Before, only the plain, UTF-16 and escaped forms were masked.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import uuid
from pathlib import Path

import pytest
import requests

from tests.e2e.test_cli_errors import afpbench
from tests.faults import fault_server as fs
from tests.faults.harness import SweepRun, http_model, query, run_sweep
from tests.serving import serve_process

KEY = f"canary{uuid.uuid4().hex}"  # no recognisable shape: only known-value masking can catch it
JUDGE_KEY = f"judgecanary{uuid.uuid4().hex}"
TOKEN = f"{uuid.uuid4().hex}-encoded-token"
CANARIES = {"model key": KEY, "judge key": JUDGE_KEY}
ENV = {"AFP_CANARY_ENC": KEY, "AFP_CANARY_ENC_JUDGE": JUDGE_KEY, "AFP_API_TOKEN": TOKEN, "AFP_LOG_LEVEL": "DEBUG",
       "AFP_MAX_ATTEMPTS": "2"}


def _key(h: fs.Handler) -> str:
    return (h.headers.get("Authorization") or "").removeprefix("Bearer ")


def _encodings(key: str) -> str:
    raw = key.encode()
    return (f"b64 {base64.b64encode(raw).decode()} basic {base64.b64encode(b'Bearer ' + raw).decode()} "
            f"url {base64.urlsafe_b64encode(b'u:' + raw).decode()} hex {raw.hex()} HEX {raw.hex().upper()}")


def echo_answer(h: fs.Handler, n: int, req: dict) -> None:
    key = _key(h)
    token = base64.b64encode(key.encode()).decode()
    body = fs.completion(f"[fault-server] simulated echo: {_encodings(key)}.", model=f"m-{token}",
                         request_id=f"id-{key.encode().hex()}")
    h.send_json(200, body, {"X-Request-Id": base64.b64encode(b"Bearer " + key.encode()).decode()})


def echo_error(h: fs.Handler, n: int, req: dict) -> None:
    h.send_json(500, {"error": {"message": f"rejected credential: {_encodings(_key(h))}", "code": "c500"}})


def echo_judge(h: fs.Handler, n: int, req: dict) -> None:
    h.send_json(200, fs.completion(f"[fault-server] simulated judge echo: {_encodings(_key(h))}"))


ROUTES = {"b64-answer": echo_answer, "b64-500": echo_error, "b64-judge": echo_judge}

# --- the search (independent of workers/redact.py) ----------------------------------------------

_B64_RUN = re.compile(rb"[A-Za-z0-9+/_\-]{12,}={0,2}")
_HEX_RUN = re.compile(rb"[0-9a-fA-F]{16,}")


def _readings(data: bytes) -> list[bytes]:
    """`data` itself, then every base64 run decoded from each of its first four characters (standard
    and URL-safe), then every hex run decoded at both nibble alignments."""
    out = [data]
    for run in _B64_RUN.findall(data):
        standard = run.replace(b"-", b"+").replace(b"_", b"/")
        for start in range(4):
            part = standard[start:]
            try:
                out.append(base64.b64decode(part[: len(part) // 4 * 4]))
            except binascii.Error:
                continue
    for run in _HEX_RUN.findall(data):
        for start in (0, 1):
            part = run[start:]
            out.append(binascii.unhexlify(part[: len(part) // 2 * 2]))
    return out


def leaks(data: bytes) -> list[str]:
    """Canaries in `data`, plain or encoded, whole or as a 16-character prefix (a cut key still leaks)."""
    readings = _readings(data)
    return sorted({f"{name} ({'whole' if form == secret else 'prefix'})"
                   for name, secret in CANARIES.items() for form in (secret, secret[:16])
                   if any(form.encode() in r for r in readings)})


def test_the_search_finds_every_encoded_form():
    """The search itself, so that a 0 below means something."""
    for form in _encodings(KEY).split()[1::2]:
        assert leaks(f'"x": "{form}."'.encode()) == ["model key (prefix)", "model key (whole)"], form
    assert leaks(b"masked: *** and b64 *** and Bearer ***") == []


# --- the run ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def encoded_run(tmp_path_factory) -> tuple[SweepRun, Path, dict[str, bytes]]:
    tmp = tmp_path_factory.mktemp("encoded")
    with fs.FaultServer(ROUTES) as server:
        models = [http_model("b64-answer", server.base_url("b64-answer"), api_key_env="AFP_CANARY_ENC"),
                  http_model("b64-500", server.base_url("b64-500"), api_key_env="AFP_CANARY_ENC")]
        judge = http_model("b64-judge", server.base_url("b64-judge"), api_key_env="AFP_CANARY_ENC_JUDGE")
        # judge_check off: the echoing judge gives no usable judgement, which would stop the run before it began.
        spec = {"name": "encoded canary", "models": models, "judges": [judge], "fixtures": {"only": ["P01", "P08"]},
                "conditions": ["A"], "judge_check": False}
        run = run_sweep(tmp, spec, threads=4, env=ENV)
        seen = {s.authorization for s in server.httpd.seen}
    assert run.proc.returncode == 3, run.proc.stderr[-3000:]  # b64-500's cells end INFRA_ERROR
    assert {f"Bearer {KEY}", f"Bearer {JUDGE_KEY}"} <= seen, "the canaries were in use"
    out = {"run output (DEBUG)": (run.proc.stdout + run.proc.stderr).encode()}
    for fmt in ("html", "md", "json"):
        report = afpbench(["report", run.sweep_id, "--format", fmt], tmp, env=ENV)
        assert report.returncode == 0, report.stderr
        out[f"report {fmt}"] = (report.stdout + report.stderr).encode()
    export = afpbench(["export", run.sweep_id, str(tmp / "bundle")], tmp, env=ENV)
    assert export.returncode == 0, export.stderr
    for path in (tmp / "bundle").rglob("*"):
        if path.is_file():
            out[f"bundle {path.name}"] = path.read_bytes()
    out.update(_served_pages(tmp, run))
    return run, tmp, out


def _served_pages(tmp: Path, run: SweepRun) -> dict[str, bytes]:
    """Every API read route and every viewer page of the sweep, from a real `afpbench serve`."""
    import os

    env = {**os.environ, **ENV, "AFP_DATABASE_URL": f"sqlite:///{run.db}", "AFP_LOG_LEVEL": "WARNING"}
    cell_ids = [c.id for c in run.cells]
    pages: dict[str, bytes] = {}
    with serve_process(env, tmp / "serve.log", cwd=tmp) as served:
        api = requests.Session()
        api.headers["Authorization"] = f"Bearer {TOKEN}"
        paths = ["/sweeps", f"/sweeps/{run.sweep_id}", f"/sweeps/{run.sweep_id}/cells?limit=500",
                 f"/sweeps/{run.sweep_id}/report", f"/sweeps/{run.sweep_id}/report?format=md",
                 f"/sweeps/{run.sweep_id}/report?format=html", f"/adjudications?sweep={run.sweep_id}",
                 *(f"/cells/{cell_id}" for cell_id in cell_ids)]
        for path in paths:
            response = api.get(served.base + path, timeout=60)
            assert response.status_code == 200, (path, response.text[:300])
            pages[f"API {path}"] = response.content
        viewer = requests.Session()
        login = viewer.post(f"{served.base}/view/login", data={"token": TOKEN, "next": "/view/"}, timeout=30)
        assert login.status_code == 200 and "Sign in" not in login.text
        views = ["/view/", f"/view/sweeps/{run.sweep_id}", f"/view/sweeps/{run.sweep_id}/report",
                 f"/view/sweeps/{run.sweep_id}/progress.json",
                 *(f"/view/sweeps/{run.sweep_id}/fixtures/{f}" for f in ("P01", "P08")),
                 *(f"/view/cells/{cell_id}" for cell_id in cell_ids)]
        for path in views:
            response = viewer.get(served.base + path, timeout=60)
            assert response.status_code == 200, (path, response.text[:300])
            pages[f"viewer {path}"] = response.content
        pages["serve log"] = served.log().encode()
    return pages


# --- the checks ---------------------------------------------------------------------------------


def test_no_encoded_canary_in_the_database_file(encoded_run):
    """Rule: 0 hits in the SQLite file's bytes, free pages and any WAL left behind included."""
    run, tmp, _ = encoded_run
    files = [p for p in tmp.iterdir() if p.name.startswith("afpbench.db")]
    assert files
    for path in files:
        assert leaks(path.read_bytes()) == [], path.name


def test_no_encoded_canary_in_logs_reports_export_api_or_viewer(encoded_run):
    """Rule: 0 hits in the DEBUG run output, the reports, every bundle file, every API read route and
    every viewer page of the sweep."""
    _, _, out = encoded_run
    assert any(k.startswith("API /cells/") for k in out) and any(k.startswith("viewer /view/cells/") for k in out)
    for place, data in out.items():
        assert leaks(data) == [], place


def test_the_encoded_echoes_were_stored_masked(encoded_run):
    """Not vacuous: the echoes reached storage, with every encoded form of the key replaced by ***."""
    run, _, out = encoded_run
    answered = [a for c in run.cells_of("b64-answer") for a in run.attempts_of(c) if a.outcome == "answer"]
    assert answered
    for a in answered:
        assert a.output_text.count("***") >= 5 and a.output_text.startswith("[fault-server] simulated echo: b64 ")
        assert "***" in a.served_model and "***" in a.provider_request_id
    failed = [a for c in run.cells_of("b64-500") for a in run.attempts_of(c)]
    assert failed and all("rejected credential: b64 ***" in a.error for a in failed)
    judged = [r[0] for r in query(run.db, "select raw_text from judgement where raw_text is not null")]
    assert judged and all("simulated judge echo: b64 ***" in t for t in judged)
    assert json.loads(out[f"API /sweeps/{run.sweep_id}"])["id"] == run.sweep_id
