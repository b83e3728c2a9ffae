"""The one table of providers: the families and the provider names, and every fact about them.

A *family* is a wire protocol (its adapter class: how to call, classify, probe and count tokens) and the
execution queue its cells go to (`exec.<family>`), with the size of the workers the infra files declare
for that queue (generated from this table: tests/infra_workers.py). A *provider* is a name a spec may
use: its family, default base URL and the facts its adapter is bound to (types.Provider).

Adding a family: a row in FAMILIES, its adapter module (base.Adapter) and its tests; then regenerate
the infra files (`python -m tests.infra_workers`). Spec validation, the adapters, the Celery execution
queues, the cost rule and the infra files all read this table.
"""

from __future__ import annotations

from dataclasses import dataclass

from afpbench.workers.errors import UnknownProvider
from afpbench.workers.providers.anthropic import AnthropicAdapter
from afpbench.workers.providers.base import Adapter
from afpbench.workers.providers.gemini import GeminiAdapter
from afpbench.workers.providers.openai_compat import OpenAICompatAdapter
from afpbench.workers.providers.simulated import SimulatedAdapter
from afpbench.workers.providers.types import Provider


@dataclass(frozen=True)
class Family:
    name: str
    adapter: type[Adapter]
    worker_threads: int = 16  # the exec worker's thread pool in the infra files (docs/OPERATIONS.md, sizing)
    max_workers: int = 8  # KEDA's cap on that worker's replicas: what the provider's rate limit can use

    @property
    def queue(self) -> str:
        return f"exec.{self.name}"


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("openai", OpenAICompatAdapter),
        Family("anthropic", AnthropicAdapter),
        Family("gemini", GeminiAdapter),
        Family("sim", SimulatedAdapter, worker_threads=8, max_workers=4),
    )
}

PROVIDERS: dict[str, Provider] = {
    p.name: p
    for p in (
        Provider("openai", "openai", "https://api.openai.com/v1", structured_output="strict_subset", batch=True),
        Provider("openai-compatible", "openai", None),  # llama.cpp server and vLLM honour json_schema
        Provider("vllm", "openai", None),
        Provider("ollama", "openai", "http://127.0.0.1:11434/v1"),
        Provider("openrouter", "openai", "https://openrouter.ai/api/v1", structured_output="off"),
        Provider("groq", "openai", None, structured_output="off"),
        # {resource}/openai/v1
        Provider("azure-openai", "openai", None, auth_header="api-key", lists_models=False,
                 structured_output="strict_subset"),
        Provider("anthropic", "anthropic", "https://api.anthropic.com", batch=True),
        Provider("gemini", "gemini", "https://generativelanguage.googleapis.com", batch=True),
        # The simulated provider speaks Chat Completions (and OpenAI's batch API); its output is labelled
        # simulated everywhere.
        Provider("sim", "sim", None, simulated=True, batch=True),
        # The simulator in the Anthropic and Gemini shapes (text answers; their batch APIs too), for the
        # batch lane's tests of those families without a key.
        Provider("sim-anthropic", "anthropic", None, simulated=True, batch=True),
        Provider("sim-gemini", "gemini", None, simulated=True, batch=True),
    )
}


def _bind(p: Provider) -> Adapter:
    if p.family not in FAMILIES:
        raise ValueError(f"provider {p.name!r}: family {p.family!r} is not in FAMILIES ({', '.join(FAMILIES)})")
    return FAMILIES[p.family].adapter(p)


# Adapters are stateless apart from their row: one per provider name, shared by every thread.
_ADAPTERS: dict[str, Adapter] = {name: _bind(p) for name, p in PROVIDERS.items()}
EXEC_QUEUES = tuple(f.queue for f in FAMILIES.values())


def _key(name: str) -> str:
    """The table's name for a spelling (case-insensitive; "openai-compatible:groq" style names select
    the part before the colon)."""
    key = name.strip().lower()
    found = key if key in PROVIDERS else key.split(":", 1)[0]
    if found not in PROVIDERS:
        raise UnknownProvider(f"unknown provider {name!r}; known: {', '.join(known_providers())}")
    return found


def provider(name: str) -> Provider:
    """The provider row for a name; UnknownProvider names the known ones."""
    return PROVIDERS[_key(name)]


def family_of(name: str) -> Family:
    """The family of a provider name."""
    return FAMILIES[provider(name).family]


def adapter_for(name: str) -> Adapter:
    """The adapter bound to a provider name's row."""
    return _ADAPTERS[_key(name)]


def known_providers() -> list[str]:
    return sorted(PROVIDERS)
