"""Provider name -> adapter (one adapter object per wire family; names come from the family table)."""

from __future__ import annotations

from afpbench.workers.providers.anthropic import AnthropicAdapter
from afpbench.workers.providers.base import Adapter
from afpbench.workers.providers.families import PROVIDERS, provider
from afpbench.workers.providers.gemini import GeminiAdapter
from afpbench.workers.providers.openai_compat import OpenAICompatAdapter


def _wire(family: str) -> str:
    return "openai" if family == "sim" else family  # the simulated provider speaks Chat Completions


def _adapter(wire: str, auth_header: str) -> Adapter:
    if wire == "anthropic":
        return AnthropicAdapter()
    if wire == "gemini":
        return GeminiAdapter()
    return OpenAICompatAdapter(auth_header=auth_header)


# Adapters are stateless and shared: one per (wire protocol, auth header).
_BY_SHAPE: dict[tuple[str, str], Adapter] = {}
for _p in PROVIDERS.values():
    _BY_SHAPE.setdefault((_wire(_p.family), _p.auth_header), _adapter(_wire(_p.family), _p.auth_header))


def adapter_for(name: str) -> Adapter:
    """The adapter for a provider name (case-insensitive); UnknownProvider names the known ones."""
    p = provider(name)
    return _BY_SHAPE[(_wire(p.family), p.auth_header)]
