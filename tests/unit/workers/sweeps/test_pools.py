"""One pool, one set of limits: a judge served by the tested model's server obeys that server's cap."""

from __future__ import annotations

from afpbench.workers.sweeps.pools import pool_limits
from afpbench.workers.sweeps.spec_loading import parse_spec

LOCAL = "http://127.0.0.1:8080/v1"


def test_members_of_one_pool_share_the_tightest_limits_and_other_pools_keep_their_own():
    spec = parse_spec({
        "models": [{"provider": "openai-compatible", "model": "qwen", "base_url": LOCAL,
                    "limits": {"max_in_flight": 2, "requests_per_min": 30, "burst": 2}}],
        "judges": [{"provider": "openai-compatible", "model": "qwen-judge", "base_url": LOCAL,
                    "limits": {"requests_per_min": 20, "burst": 3, "tokens_per_min": 50000}},
                   {"provider": "sim", "model": "sim-judge"}],
    })
    model, local_judge, other_judge = spec.models[0], *spec.judges
    shared = pool_limits(spec, model)
    assert pool_limits(spec, local_judge) == shared
    assert (shared.max_in_flight, shared.requests_per_min, shared.burst, shared.tokens_per_min) == (2, 20, 2, 50000)
    assert pool_limits(spec, other_judge) == other_judge.limits, "a judge elsewhere keeps its own (no cap)"
    assert pool_limits(spec, other_judge).max_in_flight is None
