"""The simulator's batch APIs (workers/sim/batches.py, batch_views.py, shape_routes.py) through the
adapters that speak them: each shape's batch ends after its delay; the entries drawn to fail fail; in an
expiring batch the second half is left unrun and comes back as expired (OpenAI, Anthropic) or missing
(Gemini); every answer is labelled simulated; each shape lists its batches newest first by its documented
cursor; a held create answer (the fault `batch_create_hold_s`) leaves a batch its client never heard of."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import requests

from afpbench.workers.providers.batch import Submission
from afpbench.workers.providers.batch_http import BatchFault
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


def _lines(adapter, endpoint, n: int, prefix: str = "c"):
    return [adapter.batch_line(endpoint, f"{prefix}{i}-a1", ChatRequest([{"role": "user", "content": f"hi {i}"}]))
            for i in range(n)]


@pytest.mark.parametrize("provider", ["sim", "sim-anthropic", "sim-gemini"])
def test_a_held_create_answer_leaves_a_batch_its_client_never_heard_of_which_the_list_shows(provider):
    """The fault `batch_create_hold_s`: the batch is registered, its answer held past the client's timeout;
    the shape's list (newest first) shows it with its label (or, Anthropic, its time and request count)."""
    adapter = adapter_for(provider)
    with SimServer(SimConfig(faults=FaultConfig(batch_create_hold_s=60, batch_delay_s=3600))) as sim:
        endpoint = Endpoint(provider, "m", sim.base_url, None, timeout_s=0.5)
        since = datetime.now(UTC)
        with pytest.raises(BatchFault) as lost:
            adapter.submit_batch(endpoint, _lines(adapter, endpoint, 2), "afpbench test batch 1 abcdef")
        found = adapter.find_batches(endpoint, Submission("afpbench test batch 1 abcdef", since, 2), datetime.now(UTC))
        stats = sim.stats()
    assert not lost.value.refused and stats["batches"] == 1
    assert len(found) == 1 and found[0].requests == 2 and not found[0].ended
    assert found[0].label == ("afpbench test batch 1 abcdef" if provider != "sim-anthropic" else None)


@pytest.mark.parametrize(("provider", "path", "size", "cursor"), [
    ("sim", "/v1/batches", "limit", "after"),
    ("sim-anthropic", "/v1/messages/batches", "limit", "after_id"),
    ("sim-gemini", "/v1/batches", "pageSize", "pageToken"),
])
def test_each_shapes_list_pages_newest_first_by_its_documented_cursor(provider, path, size, cursor):
    adapter = adapter_for(provider)
    with SimServer(SimConfig()) as sim:
        endpoint = Endpoint(provider, "m", sim.base_url, None)
        made = [adapter.submit_batch(endpoint, _lines(adapter, endpoint, 1, f"b{n}-"), f"label {n}").provider_batch_id
                for n in range(3)]
        root = sim.base_url.removesuffix("/v1")
        first = adapter.read_batch_list(requests.get(f"{root}{path}", params={size: 2}, timeout=10).json())
        second = adapter.read_batch_list(requests.get(f"{root}{path}", params={size: 2, cursor: first.next},
                                                      timeout=10).json())
    assert [v.provider_batch_id for v in first.views + second.views] == made[::-1]
    assert first.next is not None and second.next is None
