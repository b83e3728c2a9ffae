"""Secret masking for anything that may be logged or stored.

Provider keys come from the environment only and must never reach logs, attempt rows or exports.
Two layers: known secret values (the key actually in use) are replaced wherever they appear, and
key-shaped strings are masked by pattern, because providers sometimes echo keys back in error bodies.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

MASK = "***"

# Known values shorter than this are not masked: replacing e.g. "abc" everywhere would corrupt text.
_MIN_KNOWN_LEN = 6

# (pattern, replacement) pairs, applied in order; provider-specific prefixes before generic rules.
_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{12,}"), "sk-ant-" + MASK),
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}"), "sk-" + MASK),
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"), "AIza" + MASK),
    (re.compile(r"\bgsk_[A-Za-z0-9]{20,}"), "gsk_" + MASK),
    (re.compile(r"\bhf_[A-Za-z0-9]{20,}"), "hf_" + MASK),
    (re.compile(r"\bxai-[A-Za-z0-9]{20,}"), "xai-" + MASK),
    # JSON Web Tokens (three base64url segments, header starts with '{"' -> 'eyJ').
    (re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"), MASK),
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/\-]{8,}=*"), r"\1" + MASK),
    # A long token-ish value right after a key/token/secret word: `api_key=...`, `"token": "..."`.
    # The value must mix letters and digits, so counters such as "total_tokens": 1234 survive.
    (
        re.compile(
            r"(?i)\b([\w\-]*(?:key|token|secret|password)[\"']?\s*[:=]\s*[\"']?)"
            r"(?=[A-Za-z0-9_\-./+]*[0-9])(?=[A-Za-z0-9_\-./+]*[A-Za-z])[A-Za-z0-9_\-./+]{20,}={0,2}"
        ),
        r"\1" + MASK,
    ),
]

# Request/response headers that carry credentials or session state; never stored.
_SECRET_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "x-goog-api-key",
        "api-key",
        "ocp-apim-subscription-key",
        "cookie",
        "set-cookie",
    }
)


def mask_secrets(text: str, known: Iterable[str] = ()) -> str:
    """Return `text` with known secret values and key-shaped strings replaced by a mask."""
    if not text:
        return text
    for value in sorted({k for k in known if k and len(k) >= _MIN_KNOWN_LEN}, key=len, reverse=True):
        text = text.replace(value, MASK)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def mask_known(text: str, known: Iterable[str] = ()) -> str:
    """Replace only the known secret values (for model text, where patterns could alter real output)."""
    if not text:
        return text
    for value in sorted({k for k in known if k and len(k) >= _MIN_KNOWN_LEN}, key=len, reverse=True):
        text = text.replace(value, MASK)
    return text


def is_secret_header(name: str) -> bool:
    lowered = name.strip().lower()
    return lowered in _SECRET_HEADERS or lowered.endswith(("-api-key", "-subscription-key"))


def scrub_headers(headers: Mapping[str, object] | None) -> dict[str, str]:
    """Copy of `headers` without credential/cookie headers; list values are joined with ', '."""
    if not headers:
        return {}
    clean: dict[str, str] = {}
    for name, value in headers.items():
        if is_secret_header(name):
            continue
        if isinstance(value, list | tuple):
            value = ", ".join(str(v) for v in value)
        clean[name] = str(value)
    return clean
