"""The Host and Origin allow-list (api/http/hosts.py): the defence against DNS rebinding and cross-site writes."""

from __future__ import annotations

import pytest

from afpbench.api.http.hosts import HostPolicy
from afpbench.workers.errors import SettingError


def test_loopback_names_are_answered_by_default_and_nothing_else():
    """A page of another site re-resolved to 127.0.0.1 names its own host: refused, token or not."""
    policy = HostPolicy.build(None)
    for host in (b"localhost", b"localhost:8000", b"127.0.0.1:8000", b"[::1]:8000", b"[::1]", b"LOCALHOST.",
                 b"127.0.0.1"):
        assert policy.host_allowed(host), host
    for host in (b"evil.test", b"evil.test:8000", b"localhost.evil.test", b"127.0.0.1.nip.io", b"", None,
                 b"127.0.0.2", b"localhost:80x", b"[::1]x", b"bad host"):
        assert not policy.host_allowed(host), host


def test_the_bound_address_and_listed_names_are_answered_but_not_every_interface():
    listed = HostPolicy.build("Bench.Example.com, 10.0.0.5,[2001:db8::1]", "192.168.1.4")
    for host in (b"bench.example.com:443", b"10.0.0.5", b"[2001:db8::1]:8000", b"192.168.1.4:8000", b"localhost"):
        assert listed.host_allowed(host), host
    assert not listed.host_allowed(b"other.example.com")
    wildcard = HostPolicy.build(None, "0.0.0.0")
    assert wildcard.names == HostPolicy.build(None).names, "0.0.0.0 is no name a client uses"
    assert HostPolicy.build("*").host_allowed(b"anything.test:1")


@pytest.mark.parametrize("entry", ["http://bench.example.com", "bench.example.com:8000", "bench/x", "a b", "-x"])
def test_a_bad_entry_is_one_line_naming_the_setting(entry):
    with pytest.raises(SettingError, match=r"^AFP_ALLOWED_HOSTS: .* is not a host name or IP address"):
        HostPolicy.build(f"localhost,{entry}")


def test_a_write_must_come_from_this_server_as_the_browser_reached_it():
    """Origin (else Referer) = the Host it was sent to; another port or site, `null`, junk: refused."""
    policy = HostPolicy.build(None)
    host = b"127.0.0.1:8000"
    assert policy.origin_allowed(b"http://127.0.0.1:8000", None, host)
    assert policy.origin_allowed(None, b"http://127.0.0.1:8000/view/cells/3", host)
    assert policy.origin_allowed(None, None, host), "no Origin and no Referer: not a browser's cross-site request"
    for origin in (b"http://evil.test:8000", b"http://127.0.0.1:3000", b"http://localhost:8000", b"null",
                   b"file://", b"javascript:alert(1)", b"http://[::1:8000"):
        assert not policy.origin_allowed(origin, None, host), origin
    assert not policy.origin_allowed(None, b"http://evil.test:8000/attack.html", host)
    assert not policy.origin_allowed(b"http://evil.test:8000", b"http://127.0.0.1:8000/", host), "Origin decides"
    assert policy.origin_allowed(b"https://bench.example.com", None, b"bench.example.com:443")


def test_a_listed_name_may_write_from_any_port():
    """A front end the operator named in AFP_ALLOWED_HOSTS (say a dashboard on another port) may post."""
    policy = HostPolicy.build("dash.example.com")
    assert policy.origin_allowed(b"https://dash.example.com:8443", None, b"127.0.0.1:8000")
    assert not policy.origin_allowed(b"https://evil.example.com", None, b"127.0.0.1:8000")
