"""Bad API input never causes a server error: schemathesis fuzzes every operation of the real OpenAPI
schema against a real `afpbench serve` process (with a token) and checks `not_a_server_error`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.serving import serve_process

pytestmark = pytest.mark.integration


def test_schemathesis_finds_no_server_error(tmp_path):
    cli = shutil.which("schemathesis", path=os.path.dirname(sys.executable)) or shutil.which("schemathesis")
    if cli is None:
        pytest.skip("schemathesis is not installed (pip install -e '.[dev]')")
    token = "st-token-not-a-secret"
    env = {**os.environ, "AFP_API_TOKEN": token, "AFP_DATABASE_URL": f"sqlite:///{tmp_path / 'afpbench.api.db'}",
           "AFP_BROKER_URL": "memory://localhost/"}
    with serve_process(env, tmp_path / "serve.log", cwd=tmp_path, ready_within_s=60) as served:
        run = subprocess.run(
            [cli, "run", f"{served.base}/openapi.json", "-H", f"Authorization: Bearer {token}",
             "--checks", "not_a_server_error", "--max-examples", "10", "--seed", "1"],
            cwd=REPO, capture_output=True, text=True, timeout=600,
        )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "generated" in run.stdout and "passed" in run.stdout
