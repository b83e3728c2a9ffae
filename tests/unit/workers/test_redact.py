"""Secrets never reach logs, stored records or exports: masking of key-shaped strings and known
values, and dropping of credential headers."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from afpbench.workers.redact import MASK, is_secret_header, mask_known, mask_secrets, scrub_headers


@pytest.mark.parametrize(
    "secret",
    [
        "sk-proj-" + "Ab3dEf9hIj" * 4,
        "sk-ant-api03-" + "xY7_zW-q" * 6,
        "sk-" + "0123456789abcdefABCDEF",
        "AIzaSyA" + "1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p",
        "gsk_" + "a1B2c3D4e5F6g7H8i9J0k1L2",
        "hf_" + "AbCdEfGhIjKlMnOpQrStUv12",
    ],
)
def test_provider_key_shapes_are_masked(secret):
    text = f"error: Incorrect API key provided: {secret}. See docs."
    masked = mask_secrets(text)
    assert secret not in masked
    assert MASK in masked
    assert masked.startswith("error: Incorrect API key provided: ") and masked.endswith(". See docs.")


def test_bearer_token_masked_but_scheme_kept():
    masked = mask_secrets("Authorization: Bearer abc.DEF-123_xyz/+=")
    assert masked == f"Authorization: Bearer {MASK}"


@pytest.mark.parametrize(
    "template,value",
    [
        ('api_key="{}"', "9f8e7d6c5b4a39281706f5e4d3c2b1a0"),
        ('{{"x-api-key": "{}"}}', "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA=="),
        ("access_token={}", "eyAbc123Def456Ghi789Jkl012"),
        ("client_secret: {}", "1a2b3c4d5e6f7a8b9c0d1e2f"),
    ],
)
def test_long_tokens_after_key_words_are_masked(template, value):
    masked = mask_secrets(template.format(value))
    assert value not in masked
    assert masked == template.format(MASK)


def test_counters_and_ordinary_text_survive():
    """Masking must not damage usage counters, ids or model text in stored raw bodies."""
    body = json.dumps(
        {
            "usage": {"prompt_tokens": 123456789012345678901, "total_tokens": 88, "input_tokens": 638},
            "x-ratelimit-remaining-tokens": "3999995",
            "id": "chatcmpl-Cm6V0KJ1YVR6DPLxhSCUdOCKkqlMR",
            "text": "Use sk-learn or the key idea: tokens matter.",
        }
    )
    assert mask_secrets(body) == body


def test_known_values_masked_even_without_a_key_shape():
    secret = "plain-looking-secret"
    text = f"sent {secret} twice: {secret}"
    assert mask_secrets(text, [secret]) == f"sent {MASK} twice: {MASK}"
    assert mask_known(text, [secret]) == f"sent {MASK} twice: {MASK}"


def test_mask_known_leaves_key_shapes_in_model_text_alone():
    text = "The fixture's example key is sk-" + "0123456789abcdefABCDEF"
    assert mask_known(text, ["other-secret-value"]) == text


def test_short_or_empty_known_values_are_ignored():
    assert mask_secrets("a b c", ["", "a"]) == "a b c"
    assert mask_secrets("", ["secret"]) == ""


def test_masking_is_idempotent():
    once = mask_secrets("key: sk-ant-api03-" + "q" * 40)
    assert mask_secrets(once) == once


def test_scrub_headers_drops_credentials_case_insensitively():
    headers = {
        "Authorization": "Bearer sk-live",
        "X-Api-Key": "sk-ant-live",
        "x-goog-api-key": "AIza-live",
        "api-key": "azure-live",
        "Ocp-Apim-Subscription-Key": "azure-sub",
        "Cookie": "sid=1",
        "Set-Cookie": ["a=1", "b=2"],
        "Content-Type": "application/json",
        "x-ratelimit-remaining-tokens": "10",
        "Vary": ["Origin", "Referer"],
    }
    clean = scrub_headers(headers)
    assert clean == {
        "Content-Type": "application/json",
        "x-ratelimit-remaining-tokens": "10",
        "Vary": "Origin, Referer",
    }
    assert scrub_headers(None) == {}


@pytest.mark.parametrize(
    "name,secret",
    [
        ("X-Custom-Api-Key", True),
        ("anthropic-version", False),
        ("x-ratelimit-limit-tokens", False),
        ("Proxy-Authorization", True),
    ],
)
def test_is_secret_header(name, secret):
    assert is_secret_header(name) is secret


# --- the candidate pre-check (redact._may_match_a_pattern) ----------------------------------------

def _every_pattern(text: str) -> str:
    """What mask_secrets' pattern pass did before the pre-check: every pattern, always."""
    from afpbench.workers.redact import _KEEP_PREFIX, _PATTERNS

    for pattern in _PATTERNS:
        text = pattern.sub(_KEEP_PREFIX, text)
    return text


@pytest.mark.parametrize(
    "text",
    [
        "key sk-ant-api03-abcdefghijkl here",
        "sk-0123456789abcdefAB",
        "AIza" + "x" * 30,
        "gsk_" + "a" * 20,
        "hf_" + "b" * 20,
        "xai-" + "c" * 20,
        "eyJhbGciOiJI.eyJzdWIiOiIx.SflKxwRJSMeKK",
        "BEARER abcdefgh",
        "Bearer\tabcdefgh==",
        'API_KEY = "abcdefghij0123456789"',
        "x-goog-api-key:'abcdefghij0123456789zz'",
        "password=abc/def+ghi.jkl-0123456789",
        # IGNORECASE folds the Kelvin sign to k and the long s to s: the pattern masks these, so the
        # pre-check must not skip them.
        "\u212aey=abcdefghij0123456789",
        "\u017fecret: ABCDEFGHIJ0123456789",
        "token=\u212a" + "a1" * 10,
    ],
)
def test_precheck_lets_through_every_text_a_pattern_masks(text):
    """Rule: the pre-check only skips text no pattern changes; every pattern still masks."""
    assert _every_pattern(text) != text, "the sample must be one a pattern masks"
    assert mask_secrets(text) == _every_pattern(text)


def test_precheck_skips_usage_counters():
    """The per-response case the pre-check is for: a body whose only key words are counters."""
    from afpbench.workers.redact import _may_match_a_pattern

    body = '{"usage": {"prompt_tokens": 812, "completion_tokens": 20, "total_tokens": 832}, "model": "m"}'
    assert not _may_match_a_pattern(body)


_FRAGMENTS = ["sk-", "ant-", "AIza", "gsk_", "hf_", "xai-", "eyJ", ".", "Bearer", "bearer ", " ", "\t", "key",
              "TOKEN", "secret", "pass", "word", "\u212a", "\u017f", "=", ":", '"', "'", "a1", "Z9", "_", "-", "/",
              "+", "abcdefgh", "01234567", "\u00e9", "\n", "\u0130", "\u0131", "\u03a3"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=40).map("".join))
def test_precheck_never_changes_a_result(text):
    """Rule: mask_secrets with the pre-check equals every pattern applied in turn, on any text."""
    assert mask_secrets(text) == _every_pattern(text)


# --- encoded echoes of a known key (base64, hex) --------------------------------------------------

_KEY = "canary0f3a9c2e7b514d6a8e1f"


def _still_decodes_to_key(text: str) -> bool:
    """Whether any base64 run of `text`, read from any of its first four characters, holds the key."""
    import base64
    import re

    for run in re.findall(r"[A-Za-z0-9+/_\-]{4,}", text):
        for start in range(4):
            part = run[start:].replace("-", "+").replace("_", "/")
            try:
                if _KEY[:12].encode() in base64.b64decode(part[: len(part) // 4 * 4]):
                    return True
            except ValueError:
                continue
    return False


@pytest.mark.parametrize("prefix", [b"", b"x", b"xy", b"Bearer ", b"user:"])
@pytest.mark.parametrize("alphabet", ["standard", "urlsafe"])
def test_a_base64_echo_of_a_known_key_is_masked_at_every_alignment(prefix, alphabet):
    """Rule: a key echoed base64-encoded (alone or inside a longer encoded text) is masked."""
    import base64

    encode = base64.b64encode if alphabet == "standard" else base64.urlsafe_b64encode
    echoed = encode(prefix + _KEY.encode() + b" trailing bytes").decode()
    text = f'{{"error": "bad credential {echoed}"}}'
    assert _still_decodes_to_key(text), "the sample holds the key"
    for masked in (mask_secrets(text, [_KEY]), mask_known(text, [_KEY])):
        assert MASK in masked and not _still_decodes_to_key(masked), masked


@pytest.mark.parametrize("form", ["lower", "upper"])
def test_a_hex_echo_of_a_known_key_is_masked(form):
    """Rule: a key echoed as the hex of its bytes, in either case, is masked."""
    hexed = _KEY.encode().hex()
    hexed = hexed.upper() if form == "upper" else hexed
    assert mask_known(f"key=0x{hexed};", [_KEY]) == f"key=0x{MASK};"


def test_encoded_echoes_are_masked_in_raw_bytes_too():
    """Rule: the exact bytes of a body (stored base64) lose the encoded key as the text does."""
    import base64

    from afpbench.workers.redact import mask_bytes

    body = b"\xff\xfe not utf-8: " + base64.b64encode(b"k=" + _KEY.encode()) + b" " + _KEY.encode().hex().encode()
    masked = mask_bytes(body, [_KEY])
    assert base64.b64encode(_KEY.encode())[4:20] not in masked and _KEY.encode().hex().encode() not in masked
    assert masked.startswith(b"\xff\xfe not utf-8: ")


def test_text_without_an_encoded_key_is_unchanged():
    """Not over-eager: other base64 and hex text, and a short key's encodings, are left as they are."""
    import base64

    other = base64.b64encode(b"some other credential entirely").decode() + " deadbeefcafebabe"
    assert mask_known(other, [_KEY]) == other
    from afpbench.workers.redact import encoded_forms

    assert all(len(form) >= 12 for form in encoded_forms("abcdef"))
