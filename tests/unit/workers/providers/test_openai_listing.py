"""How the preflight reads an OpenAI-compatible model listing (workers/providers/openai_listing.py).
Rules (decided, docs/SECURITY.md): a listing that does not name the model stops the run naming the
nearest ids; an answer that is no model list means base_url is not the API root; an empty list cannot
confirm the name and lets the run go on; Azure's listing names base models and is not searched."""

from __future__ import annotations

import json

import pytest

from afpbench.workers.providers.openai_listing import listing_finding
from afpbench.workers.providers.types import ProbeFinding, ProbeKind


def listing(*ids: str) -> str:
    return json.dumps({"object": "list", "data": [{"id": i, "object": "model"} for i in ids]})


def test_a_listed_model_and_ollamas_default_tag_pass():
    assert listing_finding("m-1", listing("m-0", "m-1"), names_models=True) is None
    assert listing_finding("gemma3", listing("gemma3:latest"), names_models=True) is None


def test_an_unlisted_model_is_unknown_and_the_detail_names_the_nearest_ids():
    finding = listing_finding("llama-3-8x", listing("llama-3-8b", "llama-3-70b", "qwen"), names_models=True)
    assert finding is not None and finding.kind is ProbeKind.unknown_model
    assert finding.detail.startswith("the endpoint lists llama-3-8b") and "qwen" not in finding.detail


def test_a_listing_that_does_not_name_models_is_not_searched():
    assert listing_finding("my-deployment", listing("gpt-4o"), names_models=False) is None


@pytest.mark.parametrize("body", ["<html>Open WebUI</html>", "[]", '{"models": []}', '{"data": [{"name": "x"}]}'])
def test_an_answer_that_is_no_model_list_means_base_url_is_not_the_api_root(body):
    assert listing_finding("m-1", body, names_models=True) == ProbeFinding(ProbeKind.not_a_listing)


def test_an_empty_list_cannot_confirm_the_name_even_where_listings_are_not_searched():
    for names_models in (True, False):
        assert listing_finding("m-1", listing(), names_models=names_models) == ProbeFinding(ProbeKind.unconfirmed)
