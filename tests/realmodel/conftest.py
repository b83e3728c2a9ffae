"""The `realmodel` tier: a real language model (llama.cpp's server from the xllamacpp wheel) on loopback.

`local_model_server` (session) joins and verifies the weights, starts the server in this process on a free
port and stops it at the end. The size comes from AFP_REALMODEL_SIZE (0.5b default, 1.5b), the parallel
slots from AFP_REALMODEL_SLOTS (3, as `afpbench local-model serve` and the example spec plan). Without the
extra (`pip install -e '.[local-model]'`) the tier skips with the reason, and fails instead when
AFP_REQUIRE_REALMODEL=1 (as .ci/run sets).
"""

from __future__ import annotations

import os
import time

import pytest

from afpbench.workers.errors import LocalModelMissing
from afpbench.workers.localmodel.server import LocalServer, bypass_proxy_for_loopback, require_engine, serving
from afpbench.workers.localmodel.weights import DEFAULT_SIZE, chunk_paths, known, verified_file


def _unavailable(reason: str) -> None:
    if os.environ.get("AFP_REQUIRE_REALMODEL") == "1":
        pytest.fail(f"the real model is required (AFP_REQUIRE_REALMODEL=1) but unavailable: {reason}")
    pytest.skip(f"real model unavailable: {reason}")


@pytest.fixture(scope="session")
def local_model_server() -> LocalServer:
    weights = known(os.environ.get("AFP_REALMODEL_SIZE", DEFAULT_SIZE))
    try:
        require_engine()
        chunk_paths(weights)
    except LocalModelMissing as exc:
        _unavailable(str(exc))
    bypass_proxy_for_loopback(os.environ)  # the CLI and worker subprocesses inherit it
    path = verified_file(weights)
    started = time.monotonic()
    with serving(weights, path, slots=int(os.environ.get("AFP_REALMODEL_SLOTS", "3"))) as server:
        print(f"\nlocal model {server.model_name} on {server.base_url}: ready in {time.monotonic() - started:.1f} s")
        yield server
