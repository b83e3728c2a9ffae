"""What an OpenAI-compatible model listing (GET {root}/models) says about one model name.

Read by the preflight (OpenAICompatAdapter.read_probe). A valid but empty list is let through: local
servers that load one model and serve it under any name (llama.cpp, some proxies) list nothing, and a
wrong name still ends in not_found at the first call. Ollama lists its default tag (`name:latest`).
"""

from __future__ import annotations

import difflib
import json

from afpbench.workers.providers.types import ProbeFinding, ProbeKind


def listing_finding(model: str, body_text: str, *, names_models: bool) -> ProbeFinding | None:
    """None when the listing names the model (or cannot be searched for it: `names_models` False)."""
    try:
        listed = [str(m["id"]) for m in json.loads(body_text).get("data")]
    except (ValueError, AttributeError, KeyError, TypeError):
        return ProbeFinding(ProbeKind.not_a_listing)
    if not listed:
        return ProbeFinding(ProbeKind.unconfirmed)
    if not names_models or model in listed or f"{model}:latest" in listed:
        return None
    return ProbeFinding(ProbeKind.unknown_model, f"the endpoint lists {', '.join(nearest(model, listed))}")


def nearest(name: str, listed: list[str]) -> list[str]:
    """The listed ids closest to the name, else the first few: a listing may hold hundreds."""
    close = difflib.get_close_matches(name, listed, n=8, cutoff=0.4)
    return close or sorted(listed)[:8]
