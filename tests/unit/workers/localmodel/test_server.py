"""Loopback calls to the local model never go through a proxy (workers/localmodel/server.py)."""

from __future__ import annotations

import os

from afpbench.workers.localmodel.server import bypass_proxy_for_loopback, free_port
from afpbench.workers.providers.transport import close_thread_sessions, session_for


def test_loopback_names_are_added_once_and_existing_entries_kept():
    env = {"NO_PROXY": "corp.example"}
    bypass_proxy_for_loopback(env)
    bypass_proxy_for_loopback(env)
    assert env["NO_PROXY"] == "corp.example,127.0.0.1,localhost,::1"
    assert env["no_proxy"] == "127.0.0.1,localhost,::1"


def test_with_a_proxy_set_the_transport_sends_loopback_calls_directly(monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    base = f"http://127.0.0.1:{free_port()}/v1"
    close_thread_sessions()
    assert session_for(base).proxies.get("http") == "http://proxy.invalid:3128", "the proxy applies without it"
    close_thread_sessions()
    bypass_proxy_for_loopback(os.environ)  # monkeypatch restores both variables afterwards
    assert "http" not in session_for(base).proxies
    close_thread_sessions()
