"""What `afpbench run` loads (issue 14, fixed cost): the embedded mode imports neither redis-py nor kombu's
Redis transport (workers/celery_app.py, workers/tasks.py), and Alembic only when the schema needs work
(workers/store/schema_version.py). The distributed mode keeps its Redis guards and retries.

Each check runs in a fresh interpreter, so that other tests' imports do not count.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from afpbench.workers.store import migrate

# Loaded only when Redis is in use, or when the schema must be created or upgraded.
NOT_ON_THE_EMBEDDED_PATH = ("redis", "kombu.transport.redis", "alembic", "mako", "pygments")

_LOADED = textwrap.dedent("""
    def loaded(names):
        return sorted(m for m in sys.modules if any(m == n or m.startswith(n + ".") for n in names))
""")


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AFP_") or k == "AFP_KEY_VARS"}
    return subprocess.run([sys.executable, "-c", "import sys\n" + _LOADED + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=120, env={**clean, **env})


def test_importing_the_embedded_run_path_loads_no_redis_and_no_alembic(tmp_path):
    run = _python(f"""
        import afpbench.api.cli, afpbench.workers.runs, afpbench.workers.embedded
        import afpbench.workers.tasks, afpbench.workers.sim.local
        print(loaded({NOT_ON_THE_EMBEDDED_PATH!r}))
    """, AFP_DATABASE_URL=f"sqlite:///{tmp_path / 'x.db'}", AFP_BROKER_URL="memory://localhost/")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_an_embedded_run_on_a_database_at_head_loads_no_redis_and_no_alembic(tmp_path):
    """A whole demo run (sweep, embedded worker, scoring, summary) against an existing database."""
    url = f"sqlite:///{tmp_path / 'x.db'}"
    migrate.upgrade(url)
    run = _python(f"""
        from afpbench.api.cli import app
        try:
            app(["run", "--json", "--limit", "1", "--repeats", "1"])
        except SystemExit as exc:
            assert exc.code in (0, None), exc.code
        print(loaded({NOT_ON_THE_EMBEDDED_PATH!r}), file=sys.stderr)
    """, AFP_DATABASE_URL=url, AFP_BROKER_URL="memory://localhost/")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["status"] == "complete"
    assert run.stderr.strip().splitlines()[-1] == "[]", run.stderr


def test_a_new_sqlite_file_is_still_migrated_by_alembic(tmp_path):
    url = f"sqlite:///{tmp_path / 'new.db'}"
    run = _python("""
        from afpbench.workers.store.db import get_engine
        get_engine()
        print(loaded(["alembic"]) != [])
    """, AFP_DATABASE_URL=url)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "True"
    assert migrate.current_revision(url) == migrate.head_revision()


_REDIS_GUARDS = """
    import redis.exceptions
    from kombu.transport import redis as kombu_redis
    from afpbench.workers.tasks import DATABASE_UNAVAILABLE
    errors = redis.exceptions
    print(errors.ConnectionError in DATABASE_UNAVAILABLE, errors.TimeoutError in DATABASE_UNAVAILABLE,
          getattr(kombu_redis.QoS.restore_unacked, "afpbench_guarded", False))
"""


def test_a_redis_broker_keeps_the_broker_loss_guards_and_retries_redis_errors():
    """Distributed mode as before: Redis errors are retried like a database outage, kombu's QoS is guarded.
    Nothing connects at import, so no Redis server is needed."""
    run = _python(_REDIS_GUARDS, AFP_BROKER_URL="redis://127.0.0.1:1/0")
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["True", "True", "True"]


def test_an_embedded_run_with_a_redis_limiter_retries_redis_errors():
    """AFP_REDIS_URL puts the limiter on Redis in embedded mode too: its errors are retried, while the
    in-memory broker needs no transport guard."""
    run = _python(_REDIS_GUARDS, AFP_BROKER_URL="memory://localhost/", AFP_REDIS_URL="redis://127.0.0.1:1/0")
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["True", "True", "False"]
