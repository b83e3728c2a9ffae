"""The HTTP API (FastAPI): the second front door beside the CLI, over the same services in workers/."""

from afpbench.api.http.app import create_app

__all__ = ["create_app"]
