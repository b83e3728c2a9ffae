"""The provider table (workers/providers/families.py): every name has a family, every family has an
adapter, a queue and names that use it, and each family's token counting is what the cost rule reads."""

from __future__ import annotations

import pytest

from afpbench.workers.errors import UnknownProvider
from afpbench.workers.providers import families
from afpbench.workers.providers.anthropic import AnthropicAdapter
from afpbench.workers.providers.families import (
    EXEC_QUEUES,
    FAMILIES,
    PROVIDERS,
    adapter_for,
    family_of,
    known_providers,
    provider,
)
from afpbench.workers.providers.gemini import GeminiAdapter
from afpbench.workers.providers.openai_compat import OpenAICompatAdapter
from afpbench.workers.providers.simulated import SimulatedAdapter
from afpbench.workers.providers.types import Provider, UsageCounting
from tests.conftest import REPO


def test_every_provider_names_a_family_and_every_family_is_used():
    assert {p.family for p in PROVIDERS.values()} == set(FAMILIES)


@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_each_name_gets_its_familys_adapter_bound_to_its_own_row(name):
    adapter = adapter_for(name)
    assert type(adapter) is FAMILIES[PROVIDERS[name].family].adapter
    assert adapter.provider is PROVIDERS[name]
    assert family_of(name) is FAMILIES[PROVIDERS[name].family]


def test_a_row_naming_a_family_that_does_not_exist_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match=r"provider 'acme': family 'acme-wire' is not in FAMILIES \(openai, "):
        families._bind(Provider("acme", "acme-wire", None))


@pytest.mark.parametrize("name,adapter", [("openai", OpenAICompatAdapter), ("azure-openai", OpenAICompatAdapter),
                                          ("anthropic", AnthropicAdapter), ("gemini", GeminiAdapter),
                                          ("sim", SimulatedAdapter)])
def test_the_families_adapters(name, adapter):
    assert family_of(name).adapter is adapter


def test_each_family_has_its_own_execution_queue():
    assert EXEC_QUEUES == tuple(f"exec.{n}" for n in FAMILIES)
    assert family_of("sim").queue == "exec.sim" and family_of("azure-openai").queue == "exec.openai"


@pytest.mark.parametrize("name,cached_inside_input,reasoning_inside_output", [
    ("openai", True, True),  # prompt_tokens include cached_tokens, completion_tokens reasoning_tokens
    ("sim", True, True),  # the simulator answers as OpenAI does
    ("gemini", True, False),  # promptTokenCount includes cachedContentTokenCount; thoughts are beside
    ("anthropic", False, False),  # input_tokens exclude cache reads; no reasoning count is reported
])
def test_each_familys_usage_counting_is_what_the_cost_rule_reads(name, cached_inside_input, reasoning_inside_output):
    """Cost rule (scoring.measures.token_cost): cached and reasoning tokens are taken out of input and
    output only where the family's usage report counts them inside."""
    assert adapter_for(name).usage_counting == UsageCounting(cached_inside_input, reasoning_inside_output)


def test_names_are_found_case_insensitively_and_by_the_part_before_a_colon():
    assert provider("OpenAI") is PROVIDERS["openai"]
    assert adapter_for("openai-compatible:groq") is adapter_for("openai-compatible")
    with pytest.raises(UnknownProvider, match="unknown provider 'acme'; known: anthropic, azure-openai"):
        family_of("acme")
    assert known_providers() == sorted(PROVIDERS)


def spec_table(first_header: str) -> list[list[str]]:
    """The rows of the table under docs/SPEC.md's "Providers" whose header starts with `first_header`."""
    lines = (REPO / "docs" / "SPEC.md").read_text().splitlines()
    section = lines.index("### Providers")
    start = next(i for i in range(section, len(lines)) if lines[i].startswith(f"| {first_header} |"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip().strip("`") for cell in line.strip("|").split("|")])
    return rows


def test_the_spec_docs_provider_table_is_the_table():
    rows = {r[0]: r for r in spec_table("`provider`")}
    assert set(rows) == set(PROVIDERS)
    for name, row in rows.items():
        assert (row[1], row[2]) == (PROVIDERS[name].family, family_of(name).queue), name
        unset = "the value of" if PROVIDERS[name].simulated else "none"
        assert row[3].startswith(PROVIDERS[name].default_base_url or unset)
        assert row[4] == ", ".join(f"{k}: {v}" for k, v in adapter_for(name).auth_headers("<key>").items()), name


def test_the_spec_docs_family_table_is_the_table():
    rows = {r[0]: r for r in spec_table("family")}
    assert set(rows) == set(FAMILIES)
    for name, (_, module, queue, cached, reasoning) in rows.items():
        family = FAMILIES[name]
        assert module == f"workers/providers/{family.adapter.__module__.rsplit('.', 1)[1]}.py"
        assert queue == family.queue
        counting = family.adapter.usage_counting
        assert (cached == "inside input", reasoning == "inside output") == (
            counting.cached_inside_input, counting.reasoning_inside_output), name
