"""The one error base. Every failure afpbench expects and can explain in one line is an AfpbenchError;
the CLI (api/cli.py `main`) and the HTTP API (api/http/app.py) map them in one place each.

`reference` is the lowest layer (everything may import it), so the base lives here.
"""

from __future__ import annotations


class AfpbenchError(Exception):
    """A known failure: the message names the file, field or value and what is wrong."""

    #: CLI exit status for this failure (2: the input or the configuration is wrong).
    exit_code = 2
    #: HTTP status the API answers with.
    http_status = 422


class NotFoundError(AfpbenchError, LookupError):
    """Something named by id does not exist."""

    http_status = 404


class ConflictError(AfpbenchError):
    """The request is well formed but the stored state forbids it (sealed inputs changed, ...)."""

    http_status = 409


class DependencyError(AfpbenchError):
    """Something outside afpbench (an endpoint, a key, the database) refused or is unreachable."""

    http_status = 424
