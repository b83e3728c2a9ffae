"""What an execute task does next, as a typed decision: score next, retry after a delay (the worker slot
is given back), or nothing more to do. workers/tasks.py maps each onto the queue."""

from __future__ import annotations

from dataclasses import dataclass

from afpbench.workers.sweeps.time_limits import TaskLimits


@dataclass(frozen=True)
class ScoreNext:
    cell_id: int
    limits: TaskLimits | None = None  # the score message's time limits, from the sweep's judges


@dataclass(frozen=True)
class RetryLater:
    delay_s: float
    reason: str
    prepaid: bool = False  # the limiter already reserved this cell's request slot for that moment


@dataclass(frozen=True)
class Finished:
    state: str | None
    reason: str
    sweep_id: str | None = None  # known when the cell was loaded: saves the completion check a read
    # Whether the sweep still had an open cell right after this task's commit; None: not checked here
    # (a redelivery, a cancelled sweep...), so the task checks before it could claim the aggregate.
    sweep_open: bool | None = None


ExecutionDecision = ScoreNext | RetryLater | Finished
