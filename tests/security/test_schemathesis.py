"""Bad API input never causes a server error: schemathesis fuzzes every operation of the real OpenAPI
schema against a real `afpbench serve` process (with a token) and checks `not_a_server_error`."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time

import pytest
import requests

from tests.conftest import REPO

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_schemathesis_finds_no_server_error(tmp_path):
    cli = shutil.which("schemathesis", path=os.path.dirname(sys.executable)) or shutil.which("schemathesis")
    if cli is None:
        pytest.skip("schemathesis is not installed (pip install -e '.[dev]')")
    port, token = _free_port(), "st-token-not-a-secret"
    env = {**os.environ, "AFP_API_TOKEN": token, "AFP_DATABASE_URL": f"sqlite:///{tmp_path / 'afpbench.api.db'}",
           "AFP_BROKER_URL": "memory://localhost/"}
    server = subprocess.Popen([sys.executable, "-m", "afpbench.api.cli", "serve", "--port", str(port)], cwd=tmp_path,
                              env=env, stdout=open(tmp_path / "serve.log", "w"), stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(120):
            try:
                if requests.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                pass
            time.sleep(0.5)
        else:
            pytest.fail("the API did not come up: " + (tmp_path / "serve.log").read_text()[-2000:])
        run = subprocess.run(
            [cli, "run", f"{base}/openapi.json", "-H", f"Authorization: Bearer {token}",
             "--checks", "not_a_server_error", "--max-examples", "10", "--seed", "1"],
            cwd=REPO, capture_output=True, text=True, timeout=600,
        )
    finally:
        server.terminate()
        server.wait(20)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "generated" in run.stdout and "passed" in run.stdout
