"""The one table of providers: every fact about a provider name lives here.

Spec validation, the adapter registry, endpoint defaults, the Celery execution queues, limiter pools
and the cost rules all read this table. A provider's *family* is the wire protocol it speaks and the
execution queue its cells go to (`exec.<family>`).
"""

from __future__ import annotations

from dataclasses import dataclass

from afpbench.workers.errors import UnknownProvider


@dataclass(frozen=True)
class Provider:
    name: str
    family: str  # openai | anthropic | gemini | sim: wire protocol, adapter and execution queue
    default_base_url: str | None  # None: the spec must give base_url (sim: AFP_SIM_URL)
    auth_header: str = "Authorization"  # openai family only; Azure's v1 API takes "api-key"
    simulated: bool = False
    # Whether GET /models names what a request's `model` may be (Azure's names base models, not deployments).
    lists_models: bool = True
    # How a judge asks for structured output by default (workers/providers/structured.py): "json_schema"
    # (the full schema, length caps included), "strict_subset" (OpenAI strict mode refuses length
    # keywords), "off" (prompt-only: support depends on the model behind the endpoint).
    structured_output: str = "json_schema"


FAMILIES = ("openai", "anthropic", "gemini", "sim")

PROVIDERS: dict[str, Provider] = {
    p.name: p
    for p in (
        Provider("openai", "openai", "https://api.openai.com/v1", structured_output="strict_subset"),
        Provider("openai-compatible", "openai", None),  # llama.cpp server and vLLM honour json_schema
        Provider("vllm", "openai", None),
        Provider("ollama", "openai", "http://127.0.0.1:11434/v1"),
        Provider("openrouter", "openai", "https://openrouter.ai/api/v1", structured_output="off"),
        Provider("groq", "openai", None, structured_output="off"),
        # {resource}/openai/v1
        Provider("azure-openai", "openai", None, auth_header="api-key", lists_models=False,
                 structured_output="strict_subset"),
        Provider("anthropic", "anthropic", "https://api.anthropic.com"),
        Provider("gemini", "gemini", "https://generativelanguage.googleapis.com"),
        # The simulated provider speaks Chat Completions; its output is labelled simulated everywhere.
        Provider("sim", "sim", None, simulated=True),
    )
}


def provider(name: str) -> Provider:
    """The provider for a name (case-insensitive; "openai-compatible:groq" style names select the part
    before the colon)."""
    key = name.strip().lower()
    found = PROVIDERS.get(key) or PROVIDERS.get(key.split(":", 1)[0])
    if found is None:
        raise UnknownProvider(f"unknown provider {name!r}; known: {', '.join(known_providers())}")
    return found


def known_providers() -> list[str]:
    return sorted(PROVIDERS)


def exec_queue(family: str) -> str:
    """The execution queue of a provider family."""
    return f"exec.{family}"


EXEC_QUEUES = tuple(exec_queue(f) for f in FAMILIES)


# The key variables a spec may name when AFP_KEY_VARS is unset: the providers' well-known names, plus
# the AFP_KEY_ prefix for anything else an operator provisions (workers/providers/key_policy.py).
DEFAULT_KEY_VARIABLES = (
    "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENROUTER_API_KEY",
    "GROQ_API_KEY", "AZURE_OPENAI_API_KEY", "AFP_KEY_*",
)
