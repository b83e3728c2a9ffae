"""Secret masking for anything that may be logged or stored.

Provider keys come from the environment only and must never reach logs, attempt rows or exports.
Two layers: known secret values (the key actually in use) are replaced wherever they appear, and
key-shaped strings are masked by pattern, because providers sometimes echo keys back in error bodies.

A server can echo a key in a form a plain substring search misses: UTF-16 (read as UTF-8 it is the
key with NULs between its characters), JSON escapes (`\\u0073k-...`), or inside bytes that are not
valid UTF-8 at all. So masking reads every decoding it can find - the text as given, with NULs
stripped, with JSON escapes undone, and for raw bytes also UTF-16 LE/BE at both alignments - and masks
a secret found in any of them where it sits in the original, in whichever of those forms it has there.

A server can also echo a key encoded: base64 (a Basic credential, a token it wraps) or hex. A known
value is masked in those encodings too: its hex digits in either case, and its base64 in the standard
and URL-safe alphabets at each of the three byte alignments it may have inside a longer encoded text
(the characters that depend on the key's bytes alone, so whatever surrounds it, those are masked).
Pattern masking does not decode: a key-shaped string nobody told us about is found only as text.
"""

from __future__ import annotations

import base64
import codecs
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache

MASK = "***"

# Known values shorter than this are not masked: replacing e.g. "abc" everywhere would corrupt text.
_MIN_KNOWN_LEN = 6

# Patterns whose group 1 is kept (a provider's prefix, "Bearer ", "api_key=") and group 2 is the secret;
# applied in order, provider-specific prefixes before generic rules.
_PATTERNS: list[re.Pattern[str]] = [
    re.compile(r"\b(sk-ant-)([A-Za-z0-9_\-]{12,})"),
    re.compile(r"\b(sk-)([A-Za-z0-9_\-]{16,})"),
    re.compile(r"\b(AIza)([0-9A-Za-z_\-]{30,})"),
    re.compile(r"\b(gsk_)([A-Za-z0-9]{20,})"),
    re.compile(r"\b(hf_)([A-Za-z0-9]{20,})"),
    re.compile(r"\b(xai-)([A-Za-z0-9]{20,})"),
    # JSON Web Tokens (three base64url segments, header starts with '{"' -> 'eyJ').
    re.compile(r"\b()(eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,})"),
    re.compile(r"(?i)\b(bearer\s+)([A-Za-z0-9._~+/\-]{8,}=*)"),
    # A long token-ish value right after a key/token/secret word: `api_key=...`, `"token": "..."`.
    # The value must mix letters and digits, so counters such as "total_tokens": 1234 survive.
    re.compile(
        r"(?i)\b([\w\-]*(?:key|token|secret|password)[\"']?\s*[:=]\s*[\"']?)"
        r"((?=[A-Za-z0-9_\-./+]*[0-9])(?=[A-Za-z0-9_\-./+]*[A-Za-z])[A-Za-z0-9_\-./+]{20,}={0,2})"
    ),
]
_KEEP_PREFIX = r"\1" + MASK
# Necessary conditions of the patterns above, cheap to search for: a provider prefix, or a key word right
# before its separator. Text with neither is text no pattern changes, so most stored text (every response
# body, header values) skips the nine `sub`s. The key words are read in the lower-cased text: lower()
# folds what IGNORECASE matches for their letters, the Kelvin sign included, except the long s. Counters
# such as "prompt_tokens": 12 do not count ("tokens" is no key word before a separator). One search per
# word, each starting with its literal (the engine skips ahead to it): an alternation was 8x slower.
_PREFIXES = ("sk-", "AIza", "gsk_", "hf_", "xai-", "eyJ")
_KEY_WORDS = (re.compile(r"bearer\s"),
              *(re.compile(word + r"[\"']?\s*[:=]") for word in ("key", "token", "secret", "password")))


def _may_match_a_pattern(text: str) -> bool:
    if any(prefix in text for prefix in _PREFIXES):
        return True
    lowered = text.lower().replace("\u017f", "s")
    return any(word.search(lowered) is not None for word in _KEY_WORDS)


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

# Text in which a secret may hide from a substring search: NULs (UTF-16 read as UTF-8), JSON escapes.
_OBFUSCATED = re.compile(r"\x00|\\u[0-9a-fA-F]{4}|\\/")
_JSON_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")
# What may sit between two characters of an echoed secret: NULs (UTF-16/32) or their JSON escapes.
_GAP = r"(?:\x00|\\u0000)*"


# An encoded form shorter than this is not masked (a short base64 run matches ordinary text by chance).
_MIN_ENCODED_LEN = 12


@lru_cache(maxsize=256)
def encoded_forms(value: str) -> tuple[str, ...]:
    """`value` as a server may echo it encoded: hex of its UTF-8 bytes (lower and upper case) and, for
    each byte alignment 0-2 inside a longer base64 text, the base64 characters made of its bytes alone,
    in the standard and the URL-safe alphabet."""
    raw = value.encode("utf-8")
    forms = {raw.hex(), raw.hex().upper()}
    for offset in range(3):
        encoded = base64.b64encode(b"\x00" * offset + raw).decode("ascii").rstrip("=")
        first = -(-8 * offset // 6)  # the first character all of whose six bits are the value's
        last = 8 * (offset + len(raw)) // 6  # one past the last such character
        core = encoded[first:last]
        forms |= {core, core.replace("+", "-").replace("/", "_")}
    return tuple(f for f in forms if len(f) >= _MIN_ENCODED_LEN)


def _known(known: Iterable[str]) -> set[str]:
    values = {k for k in known if k and len(k) >= _MIN_KNOWN_LEN}
    return values | {form for value in values for form in encoded_forms(value)}


def _unescape(text: str) -> str:
    return _JSON_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text).replace("\\/", "/")


def _views(text: str) -> set[str]:
    """The decodings of `text` in which an obfuscated secret reads plainly."""
    unescaped = _unescape(text)
    return {text, text.replace("\x00", ""), unescaped, unescaped.replace("\x00", "")}


def _pattern_secrets(texts: Iterable[str]) -> set[str]:
    return {m.group(2) for t in texts for p in _PATTERNS for m in p.finditer(t) if m.group(2)}


def _escape_form(c: str) -> str | None:
    """The JSON escape of `c` as a regex (hex digits in either case), or None outside the BMP."""
    if ord(c) > 0xFFFF:
        return None
    return r"\\u" + "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in f"{ord(c):04x}")


@lru_cache(maxsize=512)
def _flexible(secret: str) -> re.Pattern[str]:
    """`secret` as it may sit in text: each character literal or JSON-escaped, NULs between any two."""
    parts = []
    for c in secret:
        forms = [re.escape(c), _escape_form(c), r"\\/" if c == "/" else None]
        parts.append("(?:" + "|".join(f for f in forms if f) + ")")
    return re.compile(_GAP.join(parts))


@lru_cache(maxsize=512)
def _flexible_bytes(secret: str) -> re.Pattern[bytes]:
    """`secret` as it may sit in raw bytes: UTF-8, UTF-16 LE/BE or JSON-escaped, NULs in between."""
    parts = []
    for c in secret:
        forms = {re.escape(c.encode("utf-8")), re.escape(c.encode("utf-16-le")), re.escape(c.encode("utf-16-be"))}
        escape = _escape_form(c)
        if escape:
            forms.add(escape.encode("ascii"))
        longest_first: list[bytes] = sorted(forms, key=len, reverse=True)
        parts.append(b"(?:" + b"|".join(longest_first) + b")")
    return re.compile(_GAP.encode("ascii").join(parts))


def _shaped_mask(match: re.Match[bytes]) -> bytes:
    """The mask in the secret's own layout: a UTF-16 echo (NULs between characters) gets a UTF-16
    mask, so the bytes around it keep their alignment and still decode."""
    found = match.group(0)
    core = found.strip(b"\x00")
    lead = len(found) - len(found.lstrip(b"\x00"))
    trail = len(found) - len(found.rstrip(b"\x00"))
    gap = len(core[1:]) - len(core[1:].lstrip(b"\x00"))
    return b"\x00" * lead + (b"\x00" * gap).join(c.encode("ascii") for c in MASK) + b"\x00" * trail


def _mask_all(text: str, secrets: Iterable[str]) -> str:
    for secret in sorted(set(secrets), key=len, reverse=True):
        text = _flexible(secret).sub(MASK, text)
    return text


def mask_secrets(text: str, known: Iterable[str] = ()) -> str:
    """Return `text` with known secret values and key-shaped strings replaced by a mask."""
    if not text:
        return text
    values = _known(known)
    if _OBFUSCATED.search(text):
        text = _mask_all(text, values | _pattern_secrets(_views(text)))
    else:
        for value in sorted(values, key=len, reverse=True):
            text = text.replace(value, MASK)
    if not _may_match_a_pattern(text):
        return text
    for pattern in _PATTERNS:
        text = pattern.sub(_KEEP_PREFIX, text)
    return text


def mask_known(text: str, known: Iterable[str] = ()) -> str:
    """Replace only the known secret values (for model text, where patterns could alter real output)."""
    if not text:
        return text
    values = _known(known)
    if values and _OBFUSCATED.search(text):
        return _mask_all(text, values)
    for value in sorted(values, key=len, reverse=True):
        text = text.replace(value, MASK)
    return text


# --- raw bytes ------------------------------------------------------------------------------------

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def body_encoding(data: bytes) -> str:
    """The encoding a response body is most likely in: its BOM, else the NUL layout of its first
    characters (how RFC 4627 told JSON's encodings apart), else UTF-8. The endianness is explicit so
    a BOM survives a decode/encode round trip as the character U+FEFF."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return encoding
    if len(data) >= 4:
        if not data[0]:
            return "utf-16-be" if data[1] else "utf-32-be"
        if not data[1]:
            return "utf-32-le" if not (data[2] or data[3]) else "utf-16-le"
    elif len(data) >= 2 and data[0] and not data[1]:
        return "utf-16-le"
    elif len(data) >= 2 and not data[0] and data[1]:
        return "utf-16-be"
    return "utf-8"


def decode_body(data: bytes) -> str:
    """A response body as text for parsing and display (undecodable bytes become U+FFFD)."""
    return data.decode(body_encoding(data), "replace")


def mask_bytes(data: bytes, known: Iterable[str] = (), masked_text: str | None = None) -> bytes:
    """The exact bytes of a response body with every secret masked, in every decoding found.

    Bytes that decode cleanly (UTF-8, or UTF-16/32 told by BOM or NUL layout) are masked as that text
    and encoded back, so they change only where a secret was. Other bytes are searched in each decoding
    (UTF-8, UTF-16 LE/BE at both alignments, NULs stripped, JSON escapes undone), and each secret found
    is masked in the bytes wherever it occurs in any of those forms.

    `masked_text`: the caller's `mask_secrets(decode_body(data), known)` when it already has it (the
    adapters' raw_body): a body in which that found nothing is returned at once, without masking it
    a second time on the per-response path."""
    if not data:
        return data
    known = tuple(known)
    encoding = body_encoding(data)
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError:
        pass
    else:
        masked = text if masked_text == text else mask_secrets(text, known)
        return data if masked == text else masked.encode(encoding)
    decodings = [data.decode("utf-8", "replace")]
    if b"\x00" in data:
        decodings += [data[offset:].decode(codec, "replace") for codec in ("utf-16-le", "utf-16-be")
                      for offset in (0, 1)]
    secrets = _known(known) | _pattern_secrets(view for d in decodings for view in _views(d))
    for secret in sorted(secrets, key=len, reverse=True):
        data = _flexible_bytes(secret).sub(_shaped_mask, data)
    return data


# --- headers --------------------------------------------------------------------------------------


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
