"""From a model in the spec to the Endpoint an adapter calls (default base URLs live here)."""

from __future__ import annotations

from afpbench.workers.providers.base import Endpoint
from afpbench.workers.settings import get_settings
from afpbench.workers.sweeps.spec import ModelSpec

DEFAULT_BASE_URLS = {
    "openai": "https://api.openai.com/v1",
    "openrouter": "https://openrouter.ai/api/v1",
    "ollama": "http://127.0.0.1:11434/v1",
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com",
}


def base_url_for(model: ModelSpec) -> str:
    if model.base_url:
        return model.base_url
    if model.provider == "sim":
        return get_settings().sim_url
    if model.provider in DEFAULT_BASE_URLS:
        return DEFAULT_BASE_URLS[model.provider]
    raise ValueError(f"model {model.display}: provider {model.provider!r} needs a base_url")


def endpoint_for(model: ModelSpec) -> Endpoint:
    return Endpoint(
        provider=model.provider,
        model=model.model,
        base_url=base_url_for(model),
        api_key_env=model.api_key_env,
        params=dict(model.params),
        timeout_s=model.timeout_s,
    )
