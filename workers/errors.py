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


class KeyNotAllowed(MissingKey):
    """The endpoint names a key variable the operator did not allow (AFP_KEY_VARS); nothing was read."""


class PreflightError(DependencyError):
    """An endpoint refused the preflight listing (unreachable, bad key, unknown model).

    `summary` is the line without anything the endpoint wrote; `provider_detail` is a masked snippet of
    what it wrote. str() joins both (the CLI prints it); the HTTP API answers with `summary` only, since
    a posted base_url could point at an internal service whose body must not come back to the client."""

    def __init__(self, summary: str, provider_detail: str | None = None):
        self.summary = summary
        self.provider_detail = provider_detail or None
        super().__init__(f"{summary}; {provider_detail}" if provider_detail else summary)


class SettingError(AfpbenchError, ValueError):
    """An AFP_* setting that cannot be used; the message names the setting and the entry."""


class ExcludedForConfiguration(DependencyError):
    """The command finished, but cells (or calibration items) were left without a model-quality result
    for reasons outside the model's output: a stopped model, an unreachable judge, harness failures."""

    exit_code = 3


class DatabaseConfigError(AfpbenchError, ValueError):
    """AFP_DATABASE_URL cannot be used."""


class SettingsError(AfpbenchError, ValueError):
    """Another AFP_* setting cannot be used (the message names the variable and its value)."""


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


class UnknownFilterValue(AfpbenchError, ValueError):
    """A listing's filter names a model or fixture the sweep does not have (rather than listing nothing)."""


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


class LocalModelMissing(DependencyError):
    """The local-model extra (the xllamacpp engine or a weight package) is not installed."""


class WeightsMismatch(AfpbenchError):
    """A joined or cached model file whose size or SHA-256 differs from the pinned value: never loaded."""


class LocalServerNotReady(DependencyError):
    """The local model server did not answer /health with status ok in time."""


class JudgeCheckFailed(DependencyError):
    """A judge agreed with too few of the calibration answers' known verdicts before the sweep (workers/
    grading/judge_check.py): every cell's verdict would rest on it. One line names the judge and why;
    nothing written."""


class RerunRefused(AfpbenchError, ValueError):
    """`afpbench rerun` asked for something the protocol's rerun does not allow (a state other than
    INFRA_ERROR / PROVIDER_BLOCK, a model or fixture the sweep does not have)."""


class RerunConflict(ConflictError):
    """The sweep cannot be rerun as it is (cancelled: resume it first)."""
