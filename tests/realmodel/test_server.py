"""The local server itself: OpenAI-compatible, answers under its alias, on loopback, unrewritten."""

from __future__ import annotations

import pytest
import requests

pytestmark = pytest.mark.realmodel


def test_server_lists_its_alias_and_answers_a_chat_completion(local_model_server):
    session = requests.Session()
    session.trust_env = False
    models = session.get(f"{local_model_server.base_url}/models", timeout=10).json()
    assert local_model_server.model_name in [m["id"] for m in models["data"]]
    reply = session.post(
        f"{local_model_server.base_url}/chat/completions",
        json={"model": local_model_server.model_name, "max_tokens": 16, "temperature": 0,
              "messages": [{"role": "user", "content": "Reply with the single word: ready"}]},
        timeout=120,
    ).json()
    assert reply["choices"][0]["message"]["content"].strip(), reply
    assert reply["usage"]["completion_tokens"] <= 16
    assert reply["choices"][0]["finish_reason"] in {"stop", "length"}
