"""The simulator's batch APIs (workers/sim/batches.py, batch_views.py, shape_routes.py) through the
adapters that speak them: each shape's batch ends after its delay; the entries drawn to fail fail; in an
expiring batch the second half is left unrun and comes back as expired (OpenAI, Anthropic) or missing
(Gemini); every answer is labelled simulated."""

from __future__ import annotations

import pytest

from afpbench.workers.providers.families import adapter_for
from afpbench.workers.providers.types import ChatRequest, Endpoint, OutcomeClass
from afpbench.workers.sim.server import FaultConfig, SimConfig, SimServer


@pytest.mark.parametrize("provider", ["sim", "sim-anthropic", "sim-gemini"])
def test_an_expiring_batch_answers_its_first_half_and_leaves_the_rest_unrun(provider):
    adapter = adapter_for(provider)
    with SimServer(SimConfig(faults=FaultConfig(batch_expire_rate=1.0))) as sim:
        endpoint = Endpoint(provider, "m", sim.base_url, None)
        lines = [adapter.batch_line(endpoint, f"c{i}-a1", ChatRequest([{"role": "user", "content": f"hi {i}"}]))
                 for i in range(6)]
        view = adapter.poll_batch(endpoint, adapter.submit_batch(endpoint, lines, "t").provider_batch_id)
        order = [x.custom_id for x in lines]
        results = {r.custom_id: r.result for r in adapter.batch_results(endpoint, view, (), order)}
        stats = sim.stats()
    assert view.ended and view.provider_status.lower() in ("expired", "ended")
    assert [results[f"c{i}-a1"].outcome for i in range(3)] == [OutcomeClass.answer] * 3
    assert all("simulated" in (results[f"c{i}-a1"].text or "").lower() or "sim" in results[f"c{i}-a1"].served_model
               for i in range(3))
    unrun = [results.get(f"c{i}-a1") for i in range(3, 6)]
    assert all(r is None or (r.error or "").startswith("batch entry expired") for r in unrun)
    assert stats["batches"] == 1


@pytest.mark.parametrize("provider", ["sim", "sim-anthropic", "sim-gemini"])
def test_a_batch_stays_in_progress_for_its_delay_and_errors_are_drawn_per_entry(provider):
    adapter = adapter_for(provider)
    with SimServer(SimConfig(faults=FaultConfig(batch_delay_s=3600, batch_error_rate=1.0))) as sim:
        endpoint = Endpoint(provider, "m", sim.base_url, None)
        line = adapter.batch_line(endpoint, "c1-a1", ChatRequest([{"role": "user", "content": "hi"}]))
        view = adapter.poll_batch(endpoint, adapter.submit_batch(endpoint, [line], "t").provider_batch_id)
    assert not view.ended
    with SimServer(SimConfig(faults=FaultConfig(batch_error_rate=1.0))) as sim:
        endpoint = Endpoint(provider, "m", sim.base_url, None)
        line = adapter.batch_line(endpoint, "c1-a1", ChatRequest([{"role": "user", "content": "hi"}]))
        view = adapter.poll_batch(endpoint, adapter.submit_batch(endpoint, [line], "t").provider_batch_id)
        results = adapter.batch_results(endpoint, view, (), ["c1-a1"])
    assert view.ended and len(results) == 1 and results[0].result.outcome != OutcomeClass.answer
