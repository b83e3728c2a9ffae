"""Values as every supported database can hold them, whatever a provider sent.

PostgreSQL text cannot hold NUL, and psycopg cannot encode a lone surrogate (json.loads makes one from
a `\\ud800` escape): one such character in an answer made the whole attempt write fail, so the response
was never stored and the cell was tried again and again. Stored text therefore has NULs and lone
surrogates replaced by U+FFFD (the Unicode replacement character, the same mark an undecodable byte
gets), and a round whose raw body is not exactly its stored text keeps the exact bytes too, base64 in
`raw_body_b64` (masked like the text: workers/redact.py:mask_bytes).
"""

from __future__ import annotations

import base64
import re
from typing import Any

from afpbench.workers.redact import decode_body

REPLACEMENT = "\ufffd"
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable_text(text: str) -> str:
    return text if _UNSTORABLE.search(text) is None else _UNSTORABLE.sub(REPLACEMENT, text)


def storable(value: Any) -> Any:
    """`value` (a string or JSON-like structure) with every string, keys included, storable."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable(v) for v in value]
    return value


def fit(text: str | None, length: int) -> str | None:
    """`text` cut to a VARCHAR(length) column (PostgreSQL refuses longer values; SQLite would not
    notice), marked with an ellipsis; the round's raw body keeps the whole value."""
    if text is None or len(text) <= length:
        return text
    return text[: length - 1] + "\u2026"


def body_record(raw_bytes: bytes | None, text: str) -> dict[str, str]:
    """A round's body as stored: `raw_body`, text for reading (decoded by BOM / NUL layout, unstorable
    characters replaced), plus `raw_body_b64`, the exact bytes, whenever that text is not them.
    `raw_bytes` is already masked; `text` is used only when no response body was read."""
    if raw_bytes is None:
        return {"raw_body": storable_text(text)}
    shown = storable_text(decode_body(raw_bytes))
    record = {"raw_body": shown}
    if shown.encode("utf-8") != raw_bytes:
        record["raw_body_b64"] = base64.b64encode(raw_bytes).decode("ascii")
    return record
