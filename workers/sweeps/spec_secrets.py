"""Literal credentials in a spec: a spec is stored and sealed, so a key written into it (under a
credential-like name, or a key-shaped value anywhere but the inline input data) is refused before it
could reach the database (docs/SECURITY.md)."""

from __future__ import annotations

from typing import Any

from afpbench.workers.redact import mask_secrets

# Spec fields whose content is input data (fixtures, instruction texts, a judge prompt): like a file's
# text they are not scanned for key-shaped strings (a fixture may be about a leaked key).
INLINE_DATA_PATHS = frozenset({"fixtures.inline", "instructions.inline", "judge_prompt.inline"})
# Mapping keys that mean "a credential is written here" anywhere in a spec (compared lower-case, '-' as '_').
_SECRET_FIELD_NAMES = frozenset(
    {"api_key", "apikey", "key", "token", "access_token", "authorization", "password", "secret", "x_api_key"}
)


def literal_secret_at(data: Any, path: str = "") -> str | None:
    """Where a spec holds a credential literally: a credential-named key, or a key-shaped value.

    The per-model check missed keys in `params` (sent in the request body) or in any
    other field; a spec is stored and sealed, so a literal key there would reach the database."""
    if isinstance(data, dict):
        for k, v in data.items():
            here = f"{path}.{k}" if path else str(k)
            if str(k).lower().replace("-", "_") in _SECRET_FIELD_NAMES:
                return here
            if here in INLINE_DATA_PATHS:
                continue
            found = literal_secret_at(v, here)
            if found:
                return found
    elif isinstance(data, list):
        for i, v in enumerate(data):
            found = literal_secret_at(v, f"{path}.{i}" if path else str(i))
            if found:
                return found
    elif isinstance(data, str) and any(c.isdigit() for c in data) and mask_secrets(data) != data:
        return path or "(top level)"
    return None
