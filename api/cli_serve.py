"""`afpbench serve` (the HTTP API on uvicorn) and `afpbench flower` (Celery monitoring).

Both refuse to listen beyond loopback without credentials: serve needs AFP_API_TOKEN, flower needs
AFP_FLOWER_USER and AFP_FLOWER_PASSWORD. Credentials never go on a command line (where `ps` shows
them) or into a log line.
"""

from __future__ import annotations

import ipaddress
import os

import typer

from afpbench.api.cli_results import CommandError
from afpbench.workers.settings import Settings

FLOWER_USER_ENV = "AFP_FLOWER_USER"
FLOWER_PASSWORD_ENV = "AFP_FLOWER_PASSWORD"


def is_loopback(host: str) -> bool:
    """True only for addresses that other machines cannot reach (a name other than localhost is not)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_serve_exposure(host: str, token_set: bool) -> None:
    if not token_set and not is_loopback(host):
        raise CommandError(
            f"refusing to serve on {host} without AFP_API_TOKEN: set a token, or listen on 127.0.0.1"
        )


def check_door_settings(settings: Settings) -> None:
    """The allow-lists and the catalogue parse, before the server listens: a wrong AFP_KEY_VARS,
    AFP_ALLOWED_BASE_URLS, AFP_ALLOWED_HOSTS or AFP_CATALOGUE_DIR stops `serve` with one line instead of
    failing requests."""
    from afpbench.api.http.hosts import HostPolicy
    from afpbench.workers.providers.key_policy import allowed_patterns
    from afpbench.workers.providers.url_policy import allowed_origins
    from afpbench.workers.sweeps.sources import catalogue_root

    allowed_patterns(settings.key_vars)
    allowed_origins(settings.allowed_base_urls, settings.sim_url)
    HostPolicy.build(settings.allowed_hosts)
    catalogue_root()


def flower_basic_auth(address: str, environ: dict[str, str]) -> str | None:
    """'user:password' for Flower's basic auth, or None on loopback without credentials."""
    user, password = environ.get(FLOWER_USER_ENV, ""), environ.get(FLOWER_PASSWORD_ENV, "")
    if bool(user) != bool(password):
        raise CommandError(f"set both {FLOWER_USER_ENV} and {FLOWER_PASSWORD_ENV}, or neither")
    if not user:
        if not is_loopback(address):
            raise CommandError(
                f"refusing to run Flower on {address} without {FLOWER_USER_ENV} and {FLOWER_PASSWORD_ENV}"
            )
        return None
    if ":" in user or "," in user or "," in password:
        raise CommandError(
            f"{FLOWER_USER_ENV} may not contain ':' or ','; {FLOWER_PASSWORD_ENV} may not contain ','"
        )
    return f"{user}:{password}"


def register(app: typer.Typer) -> None:
    @app.command()
    def serve(
        host: str = typer.Option("127.0.0.1", help="listen address; beyond loopback needs AFP_API_TOKEN"),
        port: int = typer.Option(8000, min=1, max=65535),
        log_level: str = typer.Option("info", help="uvicorn log level"),
    ) -> None:
        """Serve the HTTP API (OpenAPI docs at /docs). Embedded mode runs its worker in this process."""
        from afpbench.workers.settings import get_settings

        settings = get_settings()
        token = settings.api_token.get_secret_value() if settings.api_token is not None else ""
        check_serve_exposure(host, bool(token))  # before the heavy imports: a refusal is immediate
        settings.check_timing()
        check_door_settings(settings)
        import uvicorn

        from afpbench.api.http.access_log import uvicorn_log_config
        from afpbench.api.http.app import create_app

        uvicorn.run(create_app(settings, listen_host=host), host=host, port=port, log_level=log_level.lower(),
                    log_config=uvicorn_log_config())

    @app.command()
    def flower(
        port: int = typer.Option(5555, min=1, max=65535),
        address: str = typer.Option("127.0.0.1", help="beyond loopback needs AFP_FLOWER_USER/_PASSWORD"),
    ) -> None:
        """Run Flower (workers, queues, tasks) against the configured broker, with basic auth."""
        from afpbench.workers.celery_app import app as celery_app
        from afpbench.workers.settings import get_settings

        if get_settings().embedded:
            raise CommandError(
                "AFP_BROKER_URL is memory:// (embedded); Flower needs a shared broker such as redis://127.0.0.1:6379/0"
            )
        auth = flower_basic_auth(address, dict(os.environ))
        # Flower reads FLOWER_<OPTION> variables: the credentials stay off the command line.
        if auth:
            os.environ["FLOWER_BASIC_AUTH"] = auth
        else:
            os.environ.pop("FLOWER_BASIC_AUTH", None)
        # Not persistent: SQL is the record; Flower's state is a live view and needs no file of its own.
        celery_app.start(["flower", f"--port={port}", f"--address={address}", "--persistent=False"])
