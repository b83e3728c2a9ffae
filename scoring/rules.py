"""The pass rule and the dispute rule, defined once with their defaults and ranges: a sweep spec
declares them (workers/sweeps/spec.py: `pass_rule`, `dispute_rule`) and seals them, the verdict applies
them (scoring/verdict.py), `afpbench fixtures check` uses the defaults. The default values are the
protocol's (reference/protocol_facts.py, checked against reference/protocol.yaml)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from afpbench.reference.protocol_facts import DEFAULT_MIN_DIMENSION, DEFAULT_MIN_TOTAL, SCORE_MAX, TOTAL_MAX
from afpbench.reference.values import Count


class _Rule(BaseModel):
    # Declared in the spec: no unknown field, no inf/nan; sealed: never changed once made.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)


class PassRule(_Rule):
    """Declared in the sweep spec before the run and sealed with it."""

    no_fatal: Literal[True] = True  # the protocol fixes this part: any fatal failure is a fail
    min_dimension: Count = Field(default=DEFAULT_MIN_DIMENSION, ge=0, le=SCORE_MAX)
    min_total: Count = Field(default=DEFAULT_MIN_TOTAL, ge=0, le=TOTAL_MAX)

    def passes(self, scores: dict[str, int], fatal: bool) -> bool:
        if fatal:
            return False
        return min(scores.values()) >= self.min_dimension and sum(scores.values()) >= self.min_total


class DisputeRule(_Rule):
    """When the judges' verdicts dispute (then: the blind swapped re-judge, then a human), and how often
    an unusable judge reply is asked again (workers/grading/judging.py)."""

    pass_fail_disagreement: bool = True
    fatal_flag_disagreement: bool = True
    deterministic_fatal_rejected: bool = True
    dimension_gap: Count = Field(default=SCORE_MAX, ge=1, le=SCORE_MAX)  # judges this far apart on a dimension
    max_parse_retries: Count = Field(default=2, ge=0, le=5)
