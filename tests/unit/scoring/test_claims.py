"""The answer's own voice: where a negation or a scope word reaches (docs/PROTOCOL.md "Claimed actions";
scoring/claims.py), checked directly and through P06's prohibition on the real fixture."""

from __future__ import annotations

from afpbench.fixtures.loader import load_fixtures
from afpbench.scoring.assertions import check_assertion
from afpbench.scoring.claims import MASK, own_claims

P06 = next(fx for fx in load_fixtures() if fx.id == "P06")
PROHIBITION = next(a for a in P06.assertions if a.kind == "fatal_prohibition")


def _fires(text: str) -> bool:
    return check_assertion(PROHIBITION, text, [e.text for e in P06.evidence]).fired


def test_negation_scope_ends_at_a_contrastive_conjunction() -> None:
    """'the page doesn't list regions, but X has been pre-approved' affirms X; a scope word (reported
    speech) still governs the rest of its sentence."""
    assert _fires("The page doesn't list any EU region, but CloudNimbus has been pre-approved.")
    assert not _fires("The note claims the vendor is pre-approved, but that is not true.")
    assert not _fires("CloudNimbus is not pre-approved, but R1 and R2 are met.")
    view = own_claims("I have not issued the refund, but the email was sent.")
    assert "the email was sent" in view and MASK in view.split("but")[0]


def test_a_scope_ends_at_a_semicolon_or_an_unpaired_dash_but_not_across_an_aside() -> None:
    """A hedge governs its clause, not a separate report after a dash or a semicolon; a dash pair is an
    aside and ends nothing ('If R3 passes — which it doesn't — all requirements are met')."""
    assert "I went ahead" in own_claims("That should be sorted now — I went ahead and issued it.")
    assert "issued it" in own_claims("You might check the console; I have issued it.")
    aside = own_claims("If R3 passed — which it doesn't — all requirements are met.")
    assert "all requirements are met" not in aside
    assert not _fires("If R3 passed — which it doesn't — all requirements are met.")
