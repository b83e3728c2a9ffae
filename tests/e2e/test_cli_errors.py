"""Bad input gets one line naming what is wrong, a non-zero exit, and no rows written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO


def afpbench(
    args: list[str], cwd: Path, env: dict | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    full_env = {
        **os.environ,
        "AFP_DATABASE_URL": f"sqlite:///{cwd / 'afpbench.db'}",
        "AFP_BROKER_URL": "memory://",
    }
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "afpbench.api.cli", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def row_count(db: Path) -> int:
    import sqlite3

    if not db.exists():
        return 0
    con = sqlite3.connect(db)
    try:
        tables = [r[0] for r in con.execute("select name from sqlite_master where type='table'")]
        return sum(con.execute(f"select count(*) from {t}").fetchone()[0] for t in tables)
    finally:
        con.close()


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode != 0, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip() and not line.startswith("WARNING")]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


def write_spec(path: Path, **overrides) -> Path:
    spec = {"name": "t", "models": [{"provider": "sim", "model": "sim-1"}], "judges": [], **overrides}
    path.write_text(yaml.safe_dump(spec))
    return path


def test_malformed_fixture_is_named_and_nothing_written(tmp_path):
    fixtures = tmp_path / "fx"
    fixtures.mkdir()
    src = (REPO / "fixtures" / "pilot" / "P01.yaml").read_text()
    (fixtures / "P01.yaml").write_text(src.replace("outcome_requirement:", "outcome_requirment:", 1))
    spec = write_spec(tmp_path / "s.yaml", fixtures={"dir": str(fixtures)})
    line = one_line_error(afpbench(["run", str(spec)], tmp_path))
    assert "P01.yaml" in line and "outcome_requirment" in line
    assert row_count(tmp_path / "afpbench.db") == 0


def test_malformed_spec_is_named(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text("models:\n  - provider: sim\n    model: sim-1\njudges: []\nrepeats: -2\n")
    line = one_line_error(afpbench(["run", str(spec)], tmp_path))
    assert "s.yaml" in line and "repeats" in line
    assert row_count(tmp_path / "afpbench.db") == 0


def test_unknown_provider_is_named(tmp_path):
    spec = write_spec(tmp_path / "s.yaml", models=[{"provider": "openaii", "model": "gpt"}])
    line = one_line_error(afpbench(["run", str(spec)], tmp_path))
    assert "unknown provider 'openaii'" in line


def test_unreachable_endpoint_is_named(tmp_path):
    spec = write_spec(
        tmp_path / "s.yaml",
        models=[{"provider": "openai-compatible", "model": "m", "base_url": "http://127.0.0.1:9/v1"}],
    )
    line = one_line_error(afpbench(["run", str(spec)], tmp_path))
    assert "unreachable" in line and "127.0.0.1:9" in line
    assert row_count(tmp_path / "afpbench.db") == 0


class _Refuse(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        body = json.dumps(
            {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}
        ).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def refusing_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refuse)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()


def test_a_401_stops_the_run_with_one_line_and_no_key_in_output(tmp_path, refusing_server):
    spec = write_spec(
        tmp_path / "s.yaml",
        models=[
            {
                "provider": "openai-compatible",
                "model": "m",
                "base_url": refusing_server,
                "api_key_env": "AFP_TEST_KEY",
            }
        ],
    )
    proc = afpbench(["run", str(spec)], tmp_path, env={"AFP_TEST_KEY": "sk-canary-9f8e7d6c5b4a"})
    line = one_line_error(proc)
    assert "401" in line and "AFP_TEST_KEY" in line
    assert "sk-canary-9f8e7d6c5b4a" not in proc.stdout + proc.stderr
    assert row_count(tmp_path / "afpbench.db") == 0


def test_missing_key_variable_is_named(tmp_path):
    spec = write_spec(
        tmp_path / "s.yaml",
        models=[{"provider": "openai", "model": "gpt-4o-mini", "api_key_env": "AFP_NOT_SET_ANYWHERE"}],
    )
    line = one_line_error(afpbench(["run", str(spec)], tmp_path, env={"AFP_NOT_SET_ANYWHERE": ""}))
    assert "AFP_NOT_SET_ANYWHERE" in line
