"""The six result states of the protocol and the one rate computed from them.

Only MODEL_PASS and MODEL_FAIL measure model quality; every other state is counted and shown beside
the rate, never folded into it (reference/protocol.yaml, result_states).
"""

from __future__ import annotations

from enum import StrEnum


class ResultState(StrEnum):
    MODEL_PASS = "MODEL_PASS"
    MODEL_FAIL = "MODEL_FAIL"
    PROVIDER_BLOCK = "PROVIDER_BLOCK"
    INFRA_ERROR = "INFRA_ERROR"
    INVALID_TEST = "INVALID_TEST"
    GRADER_DISPUTE = "GRADER_DISPUTE"


IN_DENOMINATOR = frozenset({ResultState.MODEL_PASS, ResultState.MODEL_FAIL})


def pass_rate(pass_n: int, fail_n: int) -> float | None:
    """MODEL_PASS / (MODEL_PASS + MODEL_FAIL); None when nothing was scored (never a made-up 0 or 1)."""
    if pass_n < 0 or fail_n < 0:
        raise ValueError(f"counts cannot be negative: pass={pass_n}, fail={fail_n}")
    scored = pass_n + fail_n
    return None if scored == 0 else pass_n / scored
