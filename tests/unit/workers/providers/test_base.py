"""The adapter contract (workers/providers/base.py), checked for every family of the table: a family
added to families.py is held to it without a line here.

Rules: the preflight probes the same API root the calls go to; the key travels only in the family's auth
headers, never in a URL; each family says what a 404 at its probe means, and leaves the shared rules
(redirects, transient answers) to the preflight."""

from __future__ import annotations

import pytest

from afpbench.workers.providers.families import FAMILIES, PROVIDERS, adapter_for
from afpbench.workers.providers.types import ChatRequest, Endpoint, ProbeAnswer, ProbeKind, UsageCounting

KEY_ENV = "AFP_UNIT_KEY"
KEY = "k-contract-" + "5d1c9e2b7a4f"
# One provider name per family: the first row that uses it.
NAMES = [next(n for n, p in PROVIDERS.items() if p.family == family) for family in FAMILIES]


def endpoint(name: str, key_env: str | None = KEY_ENV) -> Endpoint:
    return Endpoint(name, "m-1", "http://127.0.0.1:9/api", key_env)


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


@pytest.mark.parametrize("name", NAMES)
def test_calls_and_probe_go_under_the_same_api_root_with_the_key_in_the_auth_headers_only(name):
    adapter = adapter_for(name)
    root = adapter.api_root(endpoint(name))
    call = adapter.build(endpoint(name), ChatRequest([{"role": "user", "content": "hi"}]))
    probe = adapter.probe(endpoint(name))
    assert call.url.startswith(root + "/") and probe.url.startswith(root + "/")
    auth = adapter.auth_headers(KEY)
    assert auth and all(KEY in value for value in auth.values())
    assert auth.items() <= call.headers.items() and auth.items() <= probe.headers.items()
    assert KEY not in call.url and KEY not in probe.url


@pytest.mark.parametrize("name", NAMES)
def test_without_a_key_variable_nothing_carries_a_key(name):
    adapter = adapter_for(name)
    auth_names = set(adapter.auth_headers(KEY))
    assert adapter.probe(endpoint(name, None)).headers == {}
    assert not auth_names & set(adapter.build(endpoint(name, None), ChatRequest([])).headers)


@pytest.mark.parametrize("name", NAMES)
def test_each_family_says_what_a_404_at_its_probe_means(name):
    finding = adapter_for(name).read_probe(endpoint(name), ProbeAnswer(404, '{"error": "not found"}'))
    assert finding is not None and finding.kind in (ProbeKind.unknown_model, ProbeKind.no_listing)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("status", [301, 429, 500, 503])
def test_redirects_and_transient_answers_are_left_to_the_shared_rules(name, status):
    assert adapter_for(name).read_probe(endpoint(name), ProbeAnswer(status, "")) is None


@pytest.mark.parametrize("name", NAMES)
def test_each_family_declares_how_its_usage_counts_nest(name):
    assert isinstance(adapter_for(name).usage_counting, UsageCounting)
