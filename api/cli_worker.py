"""`afpbench worker` (a Celery worker, or a group of them, for the distributed mode) and `afpbench sim`
(the simulated model in the foreground)."""

from __future__ import annotations

import sys

import typer
from rich.console import Console

from afpbench.api.cli_results import CommandError

console = Console(stderr=True)


def register(app: typer.Typer) -> None:
    app.command()(worker)
    app.command()(sim)


def worker(
    queues: str = typer.Option("all", help="comma-separated queues to consume (default: every queue)"),
    concurrency: int = typer.Option(8, help="pool size"),
    pool: str = typer.Option("threads", help="threads (I/O-bound provider calls) or prefork"),
    hostname: str | None = typer.Option(None, help="node name, e.g. w1@%h"),
    loglevel: str = typer.Option("INFO"),
    beat: bool = typer.Option(False, help="also run the periodic reconciler (one worker only)"),
    processes: int = typer.Option(1, min=1, help="worker processes, each with its own pool of --concurrency"),
    events: bool = typer.Option(False, help="send task events from the start (Flower turns them on by itself)"),
) -> None:
    """Run a Celery worker for the configured broker (AFP_BROKER_URL). It refuses to start unless the
    broker and the database answer and the schema is current: a worker that cannot record a result
    would take messages only to retry them. --processes N starts N such workers (names
    <name>-1@host ... <name>-N@host), one per core: one process's threads share one GIL."""
    from afpbench.workers.celery_app import QUEUES, check_broker, check_broker_url
    from afpbench.workers.celery_app import app as celery_app
    from afpbench.workers.limits.shared import require_shared_limiter
    from afpbench.workers.settings import get_settings

    settings = get_settings()
    settings.check_timing()
    if settings.embedded:
        raise CommandError(
            "AFP_BROKER_URL is memory:// (embedded); a separate worker needs a broker such as redis://127.0.0.1:6379/0"
        )
    check_broker_url(settings.broker_url)
    require_shared_limiter("a worker")  # on RabbitMQ: AFP_REDIS_URL, or each worker counts limits alone
    wanted = list(QUEUES) if queues == "all" else [q.strip() for q in queues.split(",") if q.strip()]
    unknown = [q for q in wanted if q not in QUEUES]
    if unknown:
        raise CommandError(f"unknown queue(s) {', '.join(unknown)}; known: {', '.join(QUEUES)}")
    argv = [
        "worker",
        f"--queues={','.join(wanted)}",
        f"--concurrency={concurrency}",
        f"--pool={pool}",
        f"--loglevel={loglevel}",
        "--without-gossip",
        # Task events are one publish per task state, several per cell, and only Flower reads them.
        *(["-E"] if events else []),
    ]
    from afpbench.workers.store.db import dispose_engines, for_worker_process

    check_broker()
    for_worker_process(concurrency)  # raises ServiceUnavailable / SchemaBehind: one line, exit 2
    if processes > 1:
        from afpbench.api.worker_group import node_names, run_group

        dispose_engines()  # the children check and connect for themselves; the parent holds no connection
        me = [sys.executable, "-m", "afpbench.api.cli", "worker", f"--queues={','.join(wanted)}",
              f"--concurrency={concurrency}", f"--pool={pool}", f"--loglevel={loglevel}",
              *(["--events"] if events else [])]
        raise typer.Exit(run_group([[*me, f"--hostname={name}", *(["--beat"] if beat and i == 0 else [])]
                                    for i, name in enumerate(node_names(hostname, processes))]))
    if hostname:
        argv.append(f"--hostname={hostname}")
    if beat:
        argv.append("--beat")
    celery_app.worker_main(argv)


def sim(
    host: str = typer.Option("127.0.0.1"),
    port: int = typer.Option(8765),
    latency_ms: float = typer.Option(0.0),
    rate_per_min: float | None = typer.Option(
        None, help="strict token-bucket limit; 429 + Retry-After beyond it"
    ),
    burst: int = typer.Option(1),
    error_5xx_rate: float = typer.Option(0.0),
    timeout_rate: float = typer.Option(0.0),
    content_filter_rate: float = typer.Option(0.0),
    malformed_rate: float = typer.Option(0.0),
    plain: bool = typer.Option(False, help="answer every prompt with one short text (throughput benchmarks)"),
    seed: int = typer.Option(0),
    batch_delay_s: float = typer.Option(0.0, help="batch API: seconds a batch stays in progress"),
    batch_error_rate: float = typer.Option(0.0, help="batch API: share of entries answered with an error"),
    batch_expire_rate: float = typer.Option(0.0, help="batch API: share of batches that expire, half unrun"),
    batch_create_hold_s: float = typer.Option(
        0.0, help="batch API: seconds each create answer is held after the batch is registered (a client that "
                  "dies meanwhile leaves a batch it does not know of)"),
) -> None:
    """Serve a simulated OpenAI-compatible model (its output is labelled simulated everywhere)."""
    from afpbench.workers.sim.server import FaultConfig, SimConfig, serve_forever

    faults = FaultConfig(
        latency_ms=latency_ms,
        rate_per_min=rate_per_min,
        burst=burst,
        error_5xx_rate=error_5xx_rate,
        timeout_rate=timeout_rate,
        content_filter_rate=content_filter_rate,
        malformed_rate=malformed_rate,
        seed=seed,
        batch_delay_s=batch_delay_s,
        batch_error_rate=batch_error_rate,
        batch_expire_rate=batch_expire_rate,
        batch_create_hold_s=batch_create_hold_s,
    )
    console.print(f"sim (simulated model) on http://{host}:{port}/v1")
    serve_forever(SimConfig(faults=faults, plain=plain), host, port)
