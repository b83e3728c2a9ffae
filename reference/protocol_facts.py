"""The protocol's facts the code decides by, each written once here and checked against
reference/protocol.yaml (tests/unit/reference/test_protocol_facts.py): the conditions, the rubric's
dimensions and scale, the rerun minimum for high-risk fixtures, and the default pass rule's values.
The rules themselves (with their range checks) are scoring/rules.py; the A-D texts reference/instructions/.
"""

from __future__ import annotations

from typing import Literal, get_args

Condition = Literal["A", "B", "C", "D"]
CONDITIONS: tuple[Condition, ...] = get_args(Condition)

Dimension = Literal["task_correctness", "evidence_discipline", "uncertainty_handling", "failure_control"]
DIMENSIONS: tuple[Dimension, ...] = get_args(Dimension)

SCORE_MAX = 2  # each dimension scores 0..SCORE_MAX
TOTAL_MAX = SCORE_MAX * len(DIMENSIONS)

HIGH_RISK_MIN_REPEATS = 3  # repeats per condition a high-risk fixture needs before it is compared

# The default pass rule: no fatal, no dimension below DEFAULT_MIN_DIMENSION, total at least DEFAULT_MIN_TOTAL.
DEFAULT_MIN_DIMENSION = 1
DEFAULT_MIN_TOTAL = 6
