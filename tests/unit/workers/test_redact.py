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
