"""Canonical hashing for the seal: SHA-256 over canonical JSON and over line-ending-normalised text.

Text is hashed after CRLF/CR -> LF so that a checkout's line-ending settings cannot break a seal
(an AP-1 seal failed for exactly that reason).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def normalise_text(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def text_sha256(text: str) -> str:
    return hashlib.sha256(normalise_text(text).encode("utf-8")).hexdigest()


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, UTF-8: the same value always gives the same bytes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def json_sha256(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()
