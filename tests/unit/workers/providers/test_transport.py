"""workers/providers/transport.py builds each model call's PreparedRequest itself instead of through
Session.post: what it sends must be exactly what Session.post would have sent on the same session."""

from __future__ import annotations

import requests

from afpbench.workers.providers.transport import _prepared_request, _send_settings, close_thread_sessions, session_for
from afpbench.workers.providers.types import PreparedCall


def _as_session_post_would(session: requests.Session, call: PreparedCall) -> requests.PreparedRequest:
    return session.prepare_request(requests.Request(call.method, call.url, headers=call.headers, json=call.json))


def _same(mine: requests.PreparedRequest, theirs: requests.PreparedRequest) -> None:
    assert (mine.method, mine.url, mine.body) == (theirs.method, theirs.url, theirs.body)
    assert list(mine.headers.items()) == list(theirs.headers.items()), "same headers, same order and case"
    assert mine.hooks == theirs.hooks


def test_prepared_request_is_what_session_post_sends(monkeypatch):
    """Rule: no per-call merge is skipped that would change the bytes sent (headers, body, auth, URL)."""
    monkeypatch.setenv("HOME", "/nonexistent")  # no ~/.netrc either way
    close_thread_sessions()
    session = session_for("http://127.0.0.1:9/v1")
    call = PreparedCall(
        "POST",
        "http://127.0.0.1:9/v1/chat/completions?x=1",
        {"Content-Type": "application/json", "accept": "application/json", "Authorization": "Bearer k-123456",
         "X-Afpbench-Cell": "c\u00e9ll"},
        {"model": "m", "messages": [{"role": "user", "content": "h\u00e9llo \u2603"}], "n": 1, "t": 0.5},
    )
    _same(_prepared_request(session, call), _as_session_post_would(session, call))
    dropping = PreparedCall("POST", call.url, {"Accept-Encoding": None, "X-Afpbench-Cell": "c"}, {"m": 1})
    _same(_prepared_request(session, dropping), _as_session_post_would(session, dropping))
    assert "Accept-Encoding" not in _prepared_request(session, dropping).headers
    close_thread_sessions()


def test_session_cookies_are_sent_as_session_post_sends_them():
    """Rule: a cookie a server set on this session goes back on the next call, as requests does."""
    close_thread_sessions()
    session = session_for("http://127.0.0.1:9/v1")
    session.cookies.set("affinity", "node-7", domain="127.0.0.1", path="/")
    call = PreparedCall("POST", "http://127.0.0.1:9/v1/chat/completions", {"X-A": "1"}, {"m": 1})
    mine = _prepared_request(session, call)
    _same(mine, _as_session_post_would(session, call))
    assert mine.headers["Cookie"] == "affinity=node-7"
    close_thread_sessions()


def test_send_settings_are_the_sessions_merged_environment_settings(monkeypatch):
    """Rule: proxies from the environment once per session; the body streamed; verify and cert kept."""
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    close_thread_sessions()
    session = session_for("http://models.invalid/v1")
    url = "http://models.invalid/v1/chat/completions"
    expected = session.merge_environment_settings(url, {}, True, None, None)
    assert _send_settings(session) == expected
    assert expected["proxies"].get("http") == "http://proxy.invalid:3128"
    close_thread_sessions()


def test_request_building_faults_keep_their_messages():
    """Rule: a bad key or base_url found while the request is built is still a clear auth_error fault
    (the request is now prepared inside post_json's fault mapping, not inside Session.post)."""
    from afpbench.workers.providers.transport import post_json
    from afpbench.workers.providers.types import Endpoint, OutcomeClass

    close_thread_sessions()
    endpoint = Endpoint("openai-compatible", "m", "http://127.0.0.1:9/v1", None, timeout_s=1, connect_timeout_s=1)
    bad_key = PreparedCall("POST", "http://127.0.0.1:9/v1/chat/completions",
                           {"Authorization": "Bearer sk-abc\nInjected: 1"}, {"m": 1})
    outcome = post_json(endpoint, bad_key)
    assert outcome.fault == "invalid header value: the API key contains whitespace or a line break"
    assert outcome.fault_class is OutcomeClass.auth_error
    no_scheme = PreparedCall("POST", "not a url/chat/completions", {}, {"m": 1})
    outcome = post_json(Endpoint("openai-compatible", "m", "not a url", None), no_scheme)
    # The message as Session.post gave it (checked against the code before this change).
    assert outcome.fault == "invalid base_url: Failed to parse: Host 'not a url' contains invalid character ' '"
    assert outcome.fault_class is OutcomeClass.auth_error
    close_thread_sessions()
