"""Masking runs on every decoding it can find (issue #15, item 5): workers/redact.py and the transport.

Rules checked:
- A key echoed in UTF-16 (LE/BE, with or without BOM, at either byte alignment), with NULs between
  its characters, JSON-escaped, or among bytes that are not UTF-8, is masked in text and in raw bytes.
- Masked raw bytes keep their encoding: a UTF-16 body stays decodable UTF-16, with a UTF-16 mask.
- Bytes without a secret come back unchanged (the exact body is stored as sent).
- The transport hands the exact bytes up; the adapter's record holds them masked, and a UTF-16 error
  body becomes a readable, masked error line (before: NUL-interleaved text that no mask recognised).
"""

from __future__ import annotations

import codecs
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from afpbench.workers.redact import MASK, decode_body, mask_bytes, mask_known, mask_secrets

KEY = "canaryplain0123456789abcdef"  # no known shape: only known-value masking can catch it
SHAPED = "sk-canaryshaped0123456789abcdef"  # caught by the key patterns too


def _nul(text: str) -> str:
    return "\x00".join(text)


def _escaped(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in text)


def _leaked(data: bytes, secret: str) -> bool:
    plain = data.replace(b"\x00", b"")
    return any(f in d for d in (data, plain) for f in (secret.encode(), secret[3:].encode(),
                                                      secret.encode("utf-16-le"), secret.encode("utf-16-be")))


TEXT_FORMS = {
    "nul-interleaved": lambda k: f"error: {_nul(k)} end",
    "nul-interleaved-escaped": lambda k: "error: " + "\\u0000".join(k) + " end",
    "json-escaped": lambda k: f'{{"message": "bad key {_escaped(k)}"}}',
    "json-escaped-slash": lambda k: "key " + k.replace("/", "\\/"),
}


@pytest.mark.parametrize("form", list(TEXT_FORMS))
def test_known_values_are_masked_in_every_text_form(form):
    """Rule: the known key is masked in model text and provider text, whatever form it is echoed in."""
    key = KEY[:4] + "/" + KEY[4:] if form == "json-escaped-slash" else KEY
    text = TEXT_FORMS[form](key)
    for masked in (mask_known(text, [key]), mask_secrets(text, [key])):
        assert MASK in masked and not _leaked(masked.encode(), key), masked


@pytest.mark.parametrize("form", ["nul-interleaved", "nul-interleaved-escaped", "json-escaped"])
def test_key_patterns_are_found_in_nul_stripped_and_unescaped_readings(form):
    """Rule: pattern masking (no known value given) also reads the text with NULs stripped and JSON
    escapes undone; model text (mask_known) is not pattern-masked, as before."""
    text = TEXT_FORMS[form](SHAPED) + " Bearer " + _nul("abcdefgh12345678")
    masked = mask_secrets(text)
    assert not _leaked(masked.encode(), SHAPED) and "abcdefgh" not in masked.replace("\x00", ""), masked
    assert mask_known(text, []) == text


BODY = json.dumps({"error": {"message": f"Incorrect API key {KEY}; Authorization: Bearer {SHAPED}"}})
BYTE_FORMS = {
    "utf-8": BODY.encode(),
    "utf-16-le": BODY.encode("utf-16-le"),
    "utf-16-be": BODY.encode("utf-16-be"),
    "utf-16-le-bom": codecs.BOM_UTF16_LE + BODY.encode("utf-16-le"),
    "utf-16-be-bom": codecs.BOM_UTF16_BE + BODY.encode("utf-16-be"),
    "utf-32-le": BODY.encode("utf-32-le"),
    # Not valid in any one encoding: the key once in UTF-16 LE at an odd offset, once BE, once with NULs.
    "mixed-invalid": (b"\xff<html>" + KEY.encode("utf-16-le") + b"\xc3 " + KEY.encode("utf-16-be")
                      + b" \xfe" + _nul(KEY).encode() + b" " + SHAPED.encode("utf-16-le") + b"\x80</html>"),
    "escaped-invalid": b"\xff" + _escaped(KEY).encode() + b"\xfe " + _escaped(SHAPED).encode(),
}


@pytest.mark.parametrize("form", list(BYTE_FORMS))
def test_raw_bytes_are_masked_in_every_decoding(form):
    """Rule: the exact bytes stored for a body hold no key in any encoding."""
    masked = mask_bytes(BYTE_FORMS[form], [KEY])
    assert masked != BYTE_FORMS[form]
    assert not _leaked(masked, KEY) and not _leaked(masked, SHAPED), masked


@pytest.mark.parametrize("form", ["utf-16-le", "utf-16-be", "utf-16-le-bom", "utf-16-be-bom", "utf-32-le"])
def test_masked_utf16_bytes_stay_valid_in_their_encoding(form):
    """Rule: masking keeps a body's encoding, so the stored bytes still decode to the masked text."""
    masked = mask_bytes(BYTE_FORMS[form], [KEY])
    text = decode_body(masked).lstrip("\ufeff")
    assert json.loads(text) == {"error": {"message": f"Incorrect API key {MASK}; Authorization: Bearer sk-{MASK}"}}


def test_a_utf16_secret_among_invalid_bytes_gets_a_utf16_mask():
    """Rule: the mask takes the secret's own layout, so the bytes after it keep their alignment."""
    body = b"\xff" + "before ".encode("utf-16-le") + KEY.encode("utf-16-le") + " after".encode("utf-16-le")
    masked = mask_bytes(body, [KEY])
    assert masked == b"\xff" + f"before {MASK} after".encode("utf-16-le")


def test_bytes_without_a_secret_are_returned_exactly():
    """Rule: the stored body is the body as sent, byte for byte, when there is nothing to mask."""
    for body in (b'{"ok": true, "usage": {"total_tokens": 88}}', "caf\u00e9 \x00 nul".encode("utf-16-le"),
                 b"\xff\xfe\x00 not text \xc3", b""):
        assert mask_bytes(body, [KEY]) == body


class _Utf16Echo(BaseHTTPRequestHandler):
    """Answers every POST with a 401 whose JSON body is UTF-16 LE and echoes the bearer key."""

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        key = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
        body = json.dumps({"error": {"message": f"Incorrect API key provided: {key}",
                                     "code": "invalid_api_key"}}).encode("utf-16-le")
        self.send_response(401)
        self.send_header("Content-Type", "application/json; charset=utf-16le")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def utf16_server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Utf16Echo)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_port}/v1"
    httpd.shutdown()
    httpd.server_close()


def test_the_transport_hands_up_the_exact_bytes_and_the_adapter_masks_them(utf16_server, monkeypatch):
    """Rule: exact bytes come up from the transport; the record holds them masked and a readable,
    masked error line (a UTF-16 error body passed both masking layers before)."""
    from afpbench.workers.providers.families import adapter_for
    from afpbench.workers.providers.transport import post_json
    from afpbench.workers.providers.types import ChatRequest, Endpoint

    monkeypatch.setenv("AFP_BUDGET_KEY", KEY)
    endpoint = Endpoint("openai-compatible", "m", utf16_server, "AFP_BUDGET_KEY")
    adapter = adapter_for("openai-compatible")
    request = ChatRequest([{"role": "user", "content": "hi"}])
    sent = post_json(endpoint, adapter.build(endpoint, request))
    assert sent.body.decode("utf-16-le").endswith(f'{KEY}", "code": "invalid_api_key"}}}}')
    assert sent.body_text == sent.body.decode("utf-16-le")
    result = adapter.call(endpoint, request)
    assert result.outcome.value == "auth_error"
    assert result.error == f"401 invalid_api_key: Incorrect API key provided: {MASK}"
    assert result.raw_bytes == sent.body.replace(KEY.encode("utf-16-le"), MASK.encode("utf-16-le"))
    for field in (result.raw_body, result.error, json.dumps(result.request_sent)):
        assert not _leaked(field.encode(), KEY)
