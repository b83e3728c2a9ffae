"""`afpbench view [SWEEP]`: the results viewer on loopback, on a free port unless --port.

It serves the same app as `afpbench serve` (the API and the viewer under /view, and in embedded mode
the worker), bound to 127.0.0.1 only, prints the URL once the socket is listening and serves until
Ctrl-C. With AFP_API_TOKEN set, the page asks for the token; the token is never printed.
"""

from __future__ import annotations

import socket

import typer

from afpbench.api.cli_results import CommandError

HOST = "127.0.0.1"


def _listening_socket(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        raise CommandError(f"--port {port}: cannot listen on {HOST}:{port} ({exc.strerror})") from None
    sock.listen(128)
    return sock


def register(app: typer.Typer) -> None:
    @app.command()
    def view(
        sweep: str | None = typer.Argument(None, help="open this sweep's page (default: the list of sweeps)"),
        port: int = typer.Option(0, min=0, max=65535, help="0 = a free port"),
    ) -> None:
        """Open the results viewer: serve it on 127.0.0.1 and print its URL (Ctrl-C stops it)."""
        from afpbench.workers.settings import get_settings
        from afpbench.workers.store.db import session_scope
        from afpbench.workers.store.models import Sweep

        settings = get_settings()
        settings.check_timing()
        if sweep is not None:
            with session_scope() as session:
                if session.get(Sweep, sweep) is None:
                    raise CommandError(f"SWEEP: no sweep with id {sweep!r} in {settings.database_url_safe()}")
        import uvicorn

        from afpbench.api.http.app import create_app
        from afpbench.api.viewer.html import seg, url

        sock = _listening_socket(port)
        bound = sock.getsockname()[1]
        page = url(f"/sweeps/{seg(sweep)}") if sweep else url("/")
        signed = settings.api_token is not None and settings.api_token.get_secret_value()
        hint = " (sign in with AFP_API_TOKEN)" if signed else ""
        typer.echo(f"afpbench viewer: http://{HOST}:{bound}{page}{hint}")
        typer.echo("Ctrl-C stops it", err=True)
        server = uvicorn.Server(uvicorn.Config(create_app(settings), log_level="warning"))
        try:
            server.run(sockets=[sock])
        finally:
            sock.close()
