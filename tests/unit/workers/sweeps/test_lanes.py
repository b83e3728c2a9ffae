"""Which lane a cell takes (docs/SPEC.md "lane"): batch only where the provider has a batch API and the
fixture needs one round; tool conversations (P08) and judges stay on the sync lane."""

from __future__ import annotations

import pytest

from afpbench.workers.errors import SpecError
from afpbench.workers.sweeps.lanes import cell_lane, model_batches
from afpbench.workers.sweeps.spec import ModelSpec
from afpbench.workers.sweeps.spec_loading import parse_spec


def test_batch_and_auto_take_the_batch_lane_for_one_round_fixtures_only():
    batch = ModelSpec(provider="sim", model="m", lane="batch")
    assert cell_lane(batch, "P01", frozenset({"P08"})) == "batch"
    assert cell_lane(batch, "P08", frozenset({"P08"})) == "sync", "a tool conversation stays sync"
    assert cell_lane(ModelSpec(provider="sim", model="m"), "P01", frozenset()) == "sync"


def test_auto_is_sync_where_the_provider_has_no_batch_api():
    assert model_batches(ModelSpec(provider="openai", model="m", lane="auto"))
    assert not model_batches(ModelSpec(provider="vllm", model="m", lane="auto"))


def test_batch_on_a_provider_without_a_batch_api_is_refused_naming_those_with_one():
    with pytest.raises(ValueError, match="no batch API here.*anthropic, gemini, openai, sim"):
        ModelSpec(provider="vllm", model="m", lane="batch")


def test_a_judge_on_the_batch_lane_is_refused():
    with pytest.raises(SpecError, match="lane: batch is not supported for judges"):
        parse_spec({"models": [{"provider": "sim", "model": "m"}],
                    "judges": [{"provider": "sim", "model": "j", "lane": "batch"}]}, "test")


def test_the_lane_is_not_part_of_the_model_identity():
    batch, sync = ModelSpec(provider="sim", model="m", lane="batch"), ModelSpec(provider="sim", model="m")
    assert batch.model_hash == sync.model_hash
