"""What `afpbench serve` runs beside the API for its lifetime.

- Embedded mode (memory:// broker): a real Celery worker on threads in this process, since nothing else
  can consume an in-memory queue.
- Both modes: a local simulated-model server, started on first need (a `provider: sim` model without a
  base_url), as `afpbench run` does; and a thread that, every few seconds, tops up the release window
  of running sweeps and claims completion when their last cell is done (the CLI's wait loop does this
  for `afpbench run`; here no request waits for a sweep).
"""

from __future__ import annotations

import logging
import threading
from contextlib import ExitStack

from sqlmodel import select

from afpbench.workers.cells.completion import open_cells
from afpbench.workers.cells.dispatch import release
from afpbench.workers.cells.finish import finish_if_done
from afpbench.workers.embedded import embedded_worker
from afpbench.workers.settings import Settings
from afpbench.workers.sim.local import needs_local_sim, start_local_sim
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Sweep, SweepStatus
from afpbench.workers.sweeps.spec import SweepSpec

log = logging.getLogger("afpbench.serve")


def top_up_running_sweeps(claimer: str = "serve") -> int:
    """Release more cells of every running sweep; claim and enqueue aggregation for finished ones."""
    with session_scope() as session:
        running = list(session.exec(select(Sweep.id).where(Sweep.status == SweepStatus.running)))
    released = 0
    for sweep_id in running:
        with session_scope() as session:
            unfinished = open_cells(session, sweep_id)
        if unfinished:
            released += release(sweep_id)
        else:
            finish_if_done(sweep_id, claimer)
    return released


class Runtime:
    def __init__(self, settings: Settings, enabled: bool = True, top_up_every_s: float = 2.0):
        self.settings = settings
        self.enabled = enabled
        self.top_up_every_s = top_up_every_s
        self._stack = ExitStack()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._sim_lock = threading.Lock()
        self._sim_started = False

    def start(self) -> None:
        if not self.enabled:
            return
        if self.settings.embedded:
            self._stack.enter_context(embedded_worker(self.settings.embedded_threads))
        self._stop.clear()
        self._thread = threading.Thread(target=self._top_up_loop, name="afpbench-top-up", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        self._stack.close()
        self._sim_started = False

    def prepare_for(self, spec: SweepSpec) -> None:
        """Start the local sim once, before preflight, when the spec has a sim model without base_url."""
        if not self.enabled or not needs_local_sim([*spec.models, *spec.judges]):
            return
        with self._sim_lock:
            if not self._sim_started:
                start_local_sim(self._stack, self.settings)
                self._sim_started = True

    def _top_up_loop(self) -> None:
        while not self._stop.wait(self.top_up_every_s):
            try:
                top_up_running_sweeps()
            except Exception as exc:  # noqa: BLE001 - keep topping up; the next round retries
                log.warning("top-up of running sweeps failed: %s: %s", type(exc).__name__, str(exc)[:200])
