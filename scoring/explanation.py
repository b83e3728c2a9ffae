"""Why an originated number is not made up (docs/PROTOCOL.md, "Provenance reaches the verdict").

The ladder (scoring/provenance.py) marks a number originated when no rung matches it exactly; that
stays in its record. Before the ladder's finding reaches the verdict or the judge, each originated number
is asked whether something else explains it; only an unexplained one counts as made up:
- a negated source value or constant (finding `sign_inversion`);
- a released figure that restates a figure the task or evidence states: its value is one the evidence
  releases under the shared number reading (scoring/numbers.py), or a year the evidence writes. Digits
  inside another token explain nothing: the 5 of "§ 288(5)", of "Art. 15(5)" or of a date is not a
  figure, so a made-up EUR 5 fee is not "in the evidence". An operand is never explained this way: a
  calculator operand is a value the model chose to compute with, and the verbatim rule is for restated
  figures;
- a grounded value (source, reference intermediate, grounded call return) rounded or cut to fewer places
  (a shortened copy of a return, "276.9617"), or multiplied or divided by a declared constant
  ("36500" = 365 x 100, the percent and day-count divisors folded into one);
- a declared transformation, or a multiple or part by a declared constant, of an earlier call's return,
  grounded or not ("0.1137" = 11.37 / 100): the number came from that call, and whatever is made up
  behind it is found there (`upstream`).
"""

from __future__ import annotations

import re
from decimal import ROUND_DOWN, ROUND_HALF_DOWN, ROUND_HALF_EVEN, ROUND_HALF_UP, ROUND_UP, Decimal, localcontext
from functools import lru_cache

from afpbench.fixtures.schema import Fixture
from afpbench.scoring.calculator import DECIMAL_CONTEXT
from afpbench.scoring.derivation import apply_transformation
from afpbench.scoring.numbers import figures_in
from afpbench.scoring.provenance_record import ProvenanceReport, rounded_to
from afpbench.scoring.render import render_user_message

_MODES = (ROUND_HALF_UP, ROUND_HALF_EVEN, ROUND_HALF_DOWN, ROUND_DOWN, ROUND_UP)
ROUNDINGS = [(places, mode) for places in range(11) for mode in _MODES]  # declared places are 0..10
_YEAR = re.compile(r"(?<!\d)(?:19|20)\d\d(?!\d)")


@lru_cache(maxsize=64)  # one text per fixture; an answer's finding and its judge listing both ask
def _restated(seen: str) -> frozenset[Decimal]:
    """The figures the task and evidence state (shared number reading), and the years they write."""
    figures = {f.value for f in figures_in(seen) if f.value >= 0}
    return frozenset(figures | {Decimal(y) for y in _YEAR.findall(seen)})


class Explainer:
    """What the fixture and the session's calls explain, asked about one originated number at a time."""

    def __init__(self, fixture: Fixture, report: ProvenanceReport) -> None:
        assert fixture.numeric is not None
        numeric = fixture.numeric
        self.restated = _restated(render_user_message(fixture))
        grounded = [(f"call#{c.index}", c.result) for c in report.calls if c.status == "grounded"]
        reference = [(f"intermediate:{i}", v) for i, v in report.reference.intermediates.items()]
        sources = [(f"source:{f.id}", f.decimal) for f in numeric.source_fields]
        self.known = [(name, v) for name, v in grounded + reference if v is not None]
        constants = [(f"constant:{c.id}", Decimal(c.value)) for c in numeric.constants]
        scaled: list[tuple[str, Decimal]] = []
        with localcontext(DECIMAL_CONTEXT):
            for name, v in sources + reference:
                for cname, c in constants:
                    if c not in (0, 1):
                        scaled += [(f"{name} x {cname}", v * c), (f"{name} / {cname}", v / c)]
        self.scaled = scaled
        returns = [(c.index, c.result) for c in report.calls if c.result is not None]
        self.from_returns: list[tuple[str, Decimal, Decimal]] = []  # (how, value, the return it came from)
        with localcontext(DECIMAL_CONTEXT):
            for index, r in returns:
                for t in numeric.transformations:
                    self.from_returns.append((f"{t.name}(call#{index})", apply_transformation(r, t), r))
                for cname, c in constants:
                    if c not in (0, 1):
                        self.from_returns.append((f"call#{index} x {cname}", r * c, r))
                        self.from_returns.append((f"call#{index} / {cname}", r / c, r))

    def why(self, value: Decimal, findings: list[str], operand: bool) -> str | None:
        """Why an originated number (an operand, or a released figure) is not made up; None if nothing
        explains it."""
        if "sign_inversion" in findings:
            return "a negated source value or constant"
        if not operand and value >= 0 and value in self.restated:
            return "a figure the task or evidence states"
        for name, v in self.known:
            for places, mode in ROUNDINGS:
                if v != value and rounded_to(v, places, mode) == value:
                    return f"{name} ({v}) rounded to {places} places"
        scaled = next((name for name, v in self.scaled if v == value), None)
        if scaled is not None:
            return scaled
        came = next((how for how, v, _ in self.from_returns if v == value), None)
        return f"{came} (made-up numbers behind that call are found there)" if came else None

    def upstream(self, value: Decimal) -> list[Decimal]:
        """The earlier returns `value` is a declared transformation or a constant multiple of."""
        return [r for _, v, r in self.from_returns if v == value]
