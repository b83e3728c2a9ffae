"""The runtime's known failures, each an AfpbenchError (see afpbench/reference/errors.py for the base
and how the front doors map them). One catalogue, so a newcomer finds every failure mode in one file."""

from __future__ import annotations

from afpbench.reference.errors import AfpbenchError, ConflictError, DependencyError, NotFoundError


class SpecError(AfpbenchError, ValueError):
    """A sweep spec that cannot be used; the message names the file and the field."""


class UnknownProvider(AfpbenchError, ValueError):
    """A provider name with no adapter."""


class MissingKey(DependencyError):
    """The endpoint names an API-key environment variable that is not set (message names the variable)."""


class PreflightError(DependencyError):
    """An endpoint refused the preflight listing (unreachable, bad key, unknown model)."""


class DatabaseConfigError(AfpbenchError, ValueError):
    """AFP_DATABASE_URL cannot be used."""


class SchemaMismatch(DependencyError):
    """The database schema and this code disagree; the message says what to do."""


class SchemaBehind(SchemaMismatch):
    """The database is at an older revision than the code needs."""


class SchemaAhead(SchemaMismatch):
    """The database was migrated by a newer afpbench than this one."""


class ServiceUnavailable(DependencyError):
    """Our own broker or database does not answer; found before anything is written or consumed."""

    http_status = 503  # the server's own dependency, not something the client named


class RunCancelled(AfpbenchError):
    """`afpbench cancel` stopped the sweep a running `afpbench run` was waiting for."""

    exit_code = 4  # distinct from bad input (2) and excluded cells (3): the run was stopped on purpose
    http_status = 409


class SweepNotFound(NotFoundError):
    """No sweep with that id."""


class RecordNotFound(NotFoundError):
    """No cell (or run record) with that id."""


class SealMismatch(ConflictError):
    """The sweep's inputs changed since it was sealed."""


class AdjudicationError(AfpbenchError, ValueError):
    """A human decision that cannot be recorded (unknown cell, cell not disputed, bad scores)."""


class ExportError(AfpbenchError):
    """The bundle cannot be written (existing directory, unknown sweep); nothing was written."""


class JudgeUnavailable(DependencyError):
    """No judge answer could be had for a cell."""


class CannedFileError(AfpbenchError, ValueError):
    """A canned-response file that cannot be used; the message names the file and the field."""
