"""llama.cpp's own HTTP server (from the xllamacpp wheel) on a free loopback port, in this process.

One thread per server: on a small shared machine two threads collapse to a few tokens per second as
soon as another process takes a core, one stays steady. The GGUF file's own chat template is used
(jinja) and nothing rewrites what the model says: a tool call written as text stays text.
"""

from __future__ import annotations

import importlib
import os
import socket
import time
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import requests

from afpbench.workers.errors import LocalModelMissing, LocalServerNotReady
from afpbench.workers.localmodel.weights import KnownWeights

LOOPBACK = "127.0.0.1"
CTX_PER_SLOT = 8192  # a condition-D prompt (~2,000 tokens) plus a judge prompt and a capped answer
READY_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class LocalServer:
    """A running local model server: what a spec needs to reach it."""

    base_url: str  # OpenAI-compatible base, ends in /v1
    model_name: str
    size: str
    slots: int
    model_path: Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def bypass_proxy_for_loopback(env: MutableMapping[str, str]) -> MutableMapping[str, str]:
    """Add the loopback names to NO_PROXY / no_proxy: an HTTP(S)_PROXY meant for the internet must
    never carry calls to a model on this machine (requests honours both spellings)."""
    for name in ("NO_PROXY", "no_proxy"):
        entries = [e for e in env.get(name, "").split(",") if e.strip()]
        for host in (LOOPBACK, "localhost", "::1"):
            if host not in entries:
                entries.append(host)
        env[name] = ",".join(entries)
    return env


def require_engine() -> ModuleType:
    """The xllamacpp module (imported by name: it is optional and ships no type information)."""
    try:
        return importlib.import_module("xllamacpp")
    except ImportError:
        raise LocalModelMissing(
            "the local model engine (xllamacpp) is not installed; install: pip install 'afpbench[local-model]'"
        ) from None


def _wait_healthy(base: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    with requests.Session() as session:
        session.trust_env = False  # loopback: never through a proxy
        while time.monotonic() < deadline:
            try:
                reply = session.get(f"{base}/health", timeout=5)
                if reply.ok and reply.json().get("status") == "ok":
                    return
                last = f"HTTP {reply.status_code}: {reply.text[:200]}"
            except (requests.RequestException, ValueError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            time.sleep(0.5)
    raise LocalServerNotReady(f"local model server at {base}: /health not ok after {timeout_s:.0f} s ({last})")


@contextmanager
def serving(
    weights: KnownWeights, model_path: Path, slots: int = 1, port: int = 0, threads: int = 1
) -> Iterator[LocalServer]:
    """Start the server, wait until /health is ok, yield where it is, stop it on exit."""
    engine = require_engine()
    params = engine.CommonParams()
    params.model.path = str(model_path)
    params.model_alias = {weights.model_name}
    params.hostnames = [LOOPBACK]
    params.port = port or free_port()
    params.n_parallel = slots
    params.n_ctx = CTX_PER_SLOT * slots  # the context is split between the slots
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.use_jinja = True  # the GGUF's own chat template (with its tools section)
    params.offline = True  # never reach for a model hub
    params.ui = False
    params.verbosity = int(os.environ.get("AFP_LOCAL_MODEL_VERBOSITY", "1"))
    server = engine.Server(params)  # loads the model; returns once it listens
    base = f"http://{LOOPBACK}:{params.port}"
    try:
        _wait_healthy(base, READY_TIMEOUT_S)
        yield LocalServer(f"{base}/v1", weights.model_name, weights.size, slots, model_path)
    finally:
        del server  # the engine stops its HTTP loop when the object goes
