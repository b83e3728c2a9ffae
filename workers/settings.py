"""All runtime configuration in one pydantic-settings class, read from AFP_* environment variables.

With nothing set, afpbench runs embedded: SQLite file in the working directory, kombu's in-memory
broker, an in-process worker on threads, an in-memory limiter.
"""

from __future__ import annotations

from functools import lru_cache

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AFP_", extra="ignore")

    database_url: str = "sqlite:///afpbench.db"
    broker_url: str = "memory://localhost/"
    redis_url: str | None = Field(
        default=None, description="Redis for the global limiter; defaults to the broker when it is Redis"
    )
    sim_url: str = Field(
        default="http://127.0.0.1:8765/v1", description="where `provider: sim` models without base_url live"
    )
    api_token: SecretStr | None = None
    require_services: bool = False

    # The HTTP API's door (docs/SECURITY.md, "Before exposing the API"). Lists are comma-separated and
    # parsed where they are enforced (workers/providers/key_policy.py, url_policy.py), so a bad entry is
    # a one-line error naming the setting. key_vars: None = the documented default list, "" = no variable.
    key_vars: str | None = Field(default=None, description="environment variables a spec may name as a key")
    allowed_base_urls: str | None = Field(default=None, description="base URLs an API-posted spec may name")
    catalogue_dir: str | None = Field(default=None, description="fixtures, instructions, judge prompts by name")
    cache_dir: str | None = Field(
        default=None, description="parsed fixtures and gate reports by content; default ~/.cache/afpbench, off: none"
    )
    max_body_bytes: int = Field(default=2 * 1024 * 1024, ge=1024, description="HTTP request body limit")
    # Which Host names the API and the viewer answer to beyond the loopback names and `serve --host`
    # (comma-separated; "*" = any): the defence against DNS rebinding (api/http/hosts.py).
    allowed_hosts: str | None = Field(default=None, description="host names the HTTP server answers to")
    # The HTTP server under load (docs/RELIABILITY.md, "The API under a burst"): requests beyond this many
    # in flight are answered 503 with Retry-After at once (api/http/door.py); a request that waits longer
    # than http_pool_timeout_s for a database connection is answered 503 too (workers/store/db.py).
    http_max_in_flight: int = Field(default=32, ge=1, le=1000, description="HTTP requests served at once")
    http_pool_timeout_s: float = Field(default=5.0, gt=0, le=300, description="an HTTP request's wait for a "
                                                                             "database connection")
    report_cache_entries: int = Field(default=32, ge=0, description="finished sweeps' rendered reports kept")

    # Worker and queue timing. Order that must hold: hard limit < visibility timeout < lease expiry.
    # The hard limit is the default of tasks that call no model (aggregate, reconcile); execute and score
    # messages carry limits derived from the sweep's timeouts (workers/sweeps/time_limits.py).
    task_hard_time_limit_s: int = 600
    visibility_timeout_s: int = 3600
    lease_expiry_s: int = 3900
    # The reconciler (a beat task): how often it runs, and how long a cell may sit in a non-terminal
    # phase without progress before its message counts as lost and is sent again.
    reconcile_interval_s: float = 60.0
    reconcile_stale_s: int = 600
    embedded_threads: int = 8
    # An embedded `run` of a big sweep without declared limits may use a second worker process (a second
    # core, workers/embedded_pair.py); 1 keeps every run in one process.
    embedded_processes: int = Field(default=2, ge=1, le=2)
    max_attempts: int = 5
    max_tool_rounds: int = 8
    # How long a later tool round may wait for its rate slot before the try counts as incomplete.
    tool_round_wait_s: float = 30.0
    # How long a judge call waits in its task for its pool's rate or in-flight slot; then the task gives
    # its worker thread back and waits as a retried message. A wait is never a failed try
    # (workers/grading/scorer.py:_wait_for_slot).
    slot_wait_s: float = Field(default=60.0, gt=0, le=3600)
    # The batch lane (workers/cells/batch_release.py, batch_poll.py): how often a pending batch is polled,
    # how long one poller holds a batch (longer than a submission or a results read takes; a poller killed
    # mid-look delays its batch by at most this), and at most how many cells one batch carries (also
    # within the provider's own limits).
    batch_poll_s: float = Field(default=30.0, gt=0, le=3600)
    batch_hold_s: float = Field(default=300.0, gt=0, le=86400)
    batch_max_entries: int = Field(default=1000, ge=1, le=100_000)

    @property
    def embedded(self) -> bool:
        return self.broker_url.startswith("memory://")

    @property
    def limiter_redis_url(self) -> str | None:
        if self.redis_url:
            return self.redis_url
        return self.broker_url if self.broker_url.startswith(("redis://", "rediss://")) else None

    @property
    def may_use_redis(self) -> bool:
        """Whether this process may talk to Redis (a broker other than the in-memory one, or a Redis
        limiter). False only in the plain embedded mode, which then never imports the Redis client."""
        return not self.embedded or self.limiter_redis_url is not None

    def database_url_safe(self) -> str:
        """The database URL with any password hidden, for output and logs."""
        # Imported here: every command reads the settings, and SQLAlchemy costs `afpbench --help` ~0.2 s.
        from sqlalchemy.engine import make_url

        return make_url(self.database_url).render_as_string(hide_password=True)

    def check_timing(self) -> None:
        if not self.task_hard_time_limit_s < self.visibility_timeout_s < self.lease_expiry_s:
            raise ValueError(
                "timing settings must satisfy AFP_TASK_HARD_TIME_LIMIT_S < AFP_VISIBILITY_TIMEOUT_S < "
                f"AFP_LEASE_EXPIRY_S; got {self.task_hard_time_limit_s} / {self.visibility_timeout_s} / "
                f"{self.lease_expiry_s}"
            )


def soft_before(hard_s: int) -> int:
    """The soft time limit for a hard one. A soft limit that fires inside SQLAlchemy can leave a prefork
    child broken, so it comes 30 s (a quarter of short limits) before the hard one, never 1 s."""
    return max(1, hard_s - min(30, hard_s // 4))


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
