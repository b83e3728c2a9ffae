"""A sweep's judge calls (judging.py:JudgeSeat): the pool's limits in the sweep, no call started after
a cancel, and every try kept as a Judgement row of the scoring run (finish reason, tokens, latency, the
request as sent, and what its retry changed), committed as its call ends rather than with the verdict:
progress and the run record show a judgement as soon as it exists, and a call's row stays when the
scoring try later fails, is cancelled or loses its lease (the call was made either way)."""

from __future__ import annotations

from afpbench.reference.hashing import text_sha256
from afpbench.scoring.judge import Judgement
from afpbench.workers.grading.judges import JudgeCall, judge_call
from afpbench.workers.grading.judging import JudgeTry
from afpbench.workers.providers.types import ResponseSchema
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.lossless import storable_text
from afpbench.workers.store.models import Cell, JudgementRow, saved_id
from afpbench.workers.sweeps.inputs import SweepInputs
from afpbench.workers.sweeps.pools import pool_limits
from afpbench.workers.sweeps.progress import is_cancelled
from afpbench.workers.sweeps.spec import ModelSpec


class JudgingCancelled(Exception):
    """The sweep was cancelled between two judge calls: no further judge call is started."""


class SweepSeat:
    """A sweep's judge calls (judging.py:JudgeSeat): the pool's limits in the sweep, no call started
    after a cancel, and every try kept as a Judgement row of this scoring run."""

    def __init__(self, cell: Cell, inputs: SweepInputs, scoring_run: int):
        self.cell, self.inputs, self.scoring_run = cell, inputs, scoring_run
        self.prompt_hash = text_sha256(inputs.judge_prompt)

    def call(self, judge: ModelSpec, messages: list[dict], wanted: ResponseSchema, judge_round: int) -> JudgeCall:
        if is_cancelled(self.cell.sweep_id):
            raise JudgingCancelled(f"sweep cancelled during judging round {judge_round}: judge "
                                   f"{judge.display} not called; the calls made are kept")
        limits = pool_limits(self.inputs.spec, judge)
        return judge_call(judge, messages, f"{self.cell.key}|judge{judge_round}", wanted, limits)

    def keep(self, attempt: JudgeTry) -> None:
        """Every try is kept: the raw text, and either the parsed judgement or why it is unusable; in a
        transaction of its own (the scoring transaction only reads until the verdict, so this never waits
        on it)."""
        call, judge = attempt.call, attempt.judge
        with session_scope() as session:
            session.add(JudgementRow(
                cell_id=saved_id(self.cell.id), scoring_run=self.scoring_run, judge_label=judge.display,
                judge_round=attempt.judge_round, prompt_sha256=self.prompt_hash,
                # A judge's text may hold bytes a database column cannot (NUL on PostgreSQL): stored readable.
                raw_text=None if call.text is None else storable_text(call.text),
                parsed=None if attempt.judgement is None else _judgement_json(attempt.judgement),
                parse_error=attempt.error, simulated=judge.simulated, finish_reason=call.finish_reason,
                input_tokens=call.usage.input_tokens, output_tokens=call.usage.output_tokens,
                latency_ms=call.latency_ms, request_sent=call.request_sent or None,
                retry_change=attempt.retry_change,
            ))


def _judgement_json(j: Judgement) -> dict:
    return {
        "scores": j.scores,
        "rationales": j.rationales,
        "fatal_flags": j.fatal_flags,
        "quotes": j.quotes,
        "total": j.total,
    }
