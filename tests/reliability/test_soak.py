"""The soak as a test: `pytest -m soak tests/reliability` (the default run skips it; see soak.py)."""

from __future__ import annotations

import pytest

from tests.conftest import need
from tests.reliability.services import ServiceUnavailable
from tests.reliability.soak import run_soak

pytestmark = [pytest.mark.soak, pytest.mark.integration]


def test_soak_ten_kills_two_broker_restarts_5000_cells_lose_and_double_nothing(tmp_path):
    try:
        figures = run_soak(tmp_path)
    except ServiceUnavailable as exc:
        need("private Redis/PostgreSQL", str(exc))
    print(figures)
    assert figures["cells"] >= 5000
    assert figures["kills"] == 10 and figures["redis_restarts"] == 2, figures
    assert figures["lost"] == 0 and figures["duplicated"] == 0, figures
    assert figures["problems"] == [], figures
