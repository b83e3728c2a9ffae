"""Provider name -> adapter. Names come from sweep configs, so unknown names fail loudly."""

from __future__ import annotations

from afpbench.workers.providers.anthropic import AnthropicAdapter
from afpbench.workers.providers.base import Adapter, MissingKey, key_for
from afpbench.workers.providers.gemini import GeminiAdapter
from afpbench.workers.providers.openai_compat import OpenAICompatAdapter

__all__ = ["UnknownProvider", "MissingKey", "adapter_for", "key_for", "known_providers"]


class UnknownProvider(ValueError):
    """A provider name with no adapter."""


_OPENAI = OpenAICompatAdapter()
_ADAPTERS: dict[str, Adapter] = {
    "openai": _OPENAI,
    "openai-compatible": _OPENAI,
    "vllm": _OPENAI,
    "ollama": _OPENAI,
    "openrouter": _OPENAI,
    "groq": _OPENAI,
    "sim": _OPENAI,  # the simulated provider speaks Chat Completions; its output is labelled simulated
    "azure-openai": OpenAICompatAdapter(auth_header="api-key"),  # Azure v1 API: {resource}/openai/v1
    "anthropic": AnthropicAdapter(),
    "gemini": GeminiAdapter(),
}


def known_providers() -> list[str]:
    return sorted(_ADAPTERS)


def adapter_for(provider: str) -> Adapter:
    """The adapter for a provider name (case-insensitive). Adapters are stateless and shared."""
    name = provider.strip().lower()
    # "openai-compatible:groq" style names select the family before the colon.
    adapter = _ADAPTERS.get(name) or _ADAPTERS.get(name.split(":", 1)[0])
    if adapter is None:
        raise UnknownProvider(f"unknown provider {provider!r}; known: {', '.join(known_providers())}")
    return adapter
