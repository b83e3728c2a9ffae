"""Finish the sweep if it is done: the one place that claims completion and has the summary computed.

The execute and score tasks, the CLI's wait loop, the API's top-up thread and the reconciler (the
backstop) all call `finish_if_done`; the claim in completion.py makes exactly one of them win.
"""

from __future__ import annotations

from afpbench.workers.celery_app import AGGREGATE, send
from afpbench.workers.cells.completion import claim_aggregate
from afpbench.workers.results.aggregation import aggregate_sweep, store_summary
from afpbench.workers.results.summary import SweepSummary


def finish_if_done(sweep_id: str, claimant: str, *, aggregate_here: bool = False) -> bool:
    """If every cell of the sweep is done and nobody claimed it yet: claim it, mark the sweep complete
    and compute its summary (here, or on the aggregate queue). True for exactly one caller."""
    if not claim_aggregate(sweep_id, claimant):
        return False
    if aggregate_here:
        store_summary(sweep_id)
    else:
        send(AGGREGATE, [sweep_id], "aggregate")
    return True


def resend_aggregate(sweep_id: str) -> None:
    """A claimed aggregate whose message was lost: compute it again (it overwrites the one row)."""
    send(AGGREGATE, [sweep_id], "aggregate")


def aggregate_now(sweep_id: str, claimant: str) -> SweepSummary:
    """Compute the summary here (the `aggregate` command, the report route): a finished sweep nobody
    claimed yet is claimed first, so its summary is stored; otherwise it is interim or re-stored."""
    claim_aggregate(sweep_id, claimant)  # a no-op while cells are open or once someone claimed it
    return aggregate_sweep(sweep_id)
