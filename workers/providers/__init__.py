"""Provider adapters: neutral chat requests in, classified HTTP outcomes out."""

from afpbench.workers.providers.base import (
    Adapter,
    AdapterResult,
    ChatRequest,
    Endpoint,
    MissingKey,
    OutcomeClass,
    PreparedCall,
    ToolCall,
    Usage,
)
from afpbench.workers.providers.registry import UnknownProvider, adapter_for, key_for, known_providers

__all__ = [
    "Adapter",
    "AdapterResult",
    "ChatRequest",
    "Endpoint",
    "MissingKey",
    "OutcomeClass",
    "PreparedCall",
    "ToolCall",
    "UnknownProvider",
    "Usage",
    "adapter_for",
    "key_for",
    "known_providers",
]
