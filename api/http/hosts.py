"""Which Host a request may name and which Origin may change something: the defence against DNS rebinding
and cross-site writes, for the API and the viewer alike, with or without a token.

A page of another site whose name is re-resolved to 127.0.0.1 reaches this server as the same origin as
itself: the browser lets it read every answer. What gives it away is the Host header, which names the
attacker's site. So only the names this server is reached by are answered: the loopback names
(localhost, 127.0.0.1, [::1]), the address `serve --host` listens on, and AFP_ALLOWED_HOSTS
(comma-separated names or addresses, no port; `*` turns the Host check off, for a proxy that checks it).
A state-changing request (any method but GET, HEAD, OPTIONS) that carries an Origin (or, without one, a
Referer) must come from this server as the browser reached it (the same host and port as its Host), or
from a name listed in AFP_ALLOWED_HOSTS. A request with neither is not a browser's cross-site request and
passes to the token check.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from afpbench.workers.errors import SettingError

SETTING = "AFP_ALLOWED_HOSTS"
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})
# Addresses that mean "every interface": no client names them in a Host header.
_EVERY_INTERFACE = frozenset({"0.0.0.0", "[::]", ""})
_LABEL = r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?"
_NAME = re.compile(rf"{_LABEL}(\.{_LABEL})*")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_DEFAULT_PORTS = {"http": "80", "https": "443"}


def _normal_name(raw: str) -> str | None:
    """A host name or IP address as compared here (lower case, IPv6 in brackets, no trailing dot), or
    None when it is neither."""
    name = raw.strip().lower().removesuffix(".")
    bare = name[1:-1] if name.startswith("[") and name.endswith("]") else name
    try:
        address = ipaddress.ip_address(bare)
    except ValueError:
        return name if _NAME.fullmatch(name) else None
    return f"[{address.compressed}]" if address.version == 6 else address.compressed


def _split_host(value: str) -> tuple[str | None, str]:
    """(normalised name, port or "") of a Host header or an Origin's netloc."""
    value = value.strip()
    if value.startswith("["):
        name, _, rest = value.partition("]")
        name += "]"
        port = rest.removeprefix(":") if rest.startswith(":") else ("" if not rest else "?")
    else:
        name, sep, port = value.rpartition(":")
        if not sep:
            name, port = value, ""
    if port and not port.isdigit():
        return None, ""
    return _normal_name(name), port


@dataclass(frozen=True)
class HostPolicy:
    names: frozenset[str]  # every name a Host header may carry
    listed: frozenset[str]  # the AFP_ALLOWED_HOSTS entries: an Origin on one of these is accepted on any port
    any_host: bool = False  # AFP_ALLOWED_HOSTS holds "*"

    @classmethod
    def build(cls, allowed_hosts: str | None, listen_host: str | None = None) -> HostPolicy:
        listed: set[str] = set()
        any_host = False
        for entry in (allowed_hosts or "").split(","):
            entry = entry.strip()
            if not entry:
                continue
            if entry == "*":
                any_host = True
                continue
            name = _normal_name(entry)
            if name is None:
                raise SettingError(f"{SETTING}: {entry!r} is not a host name or IP address (no scheme, port or "
                                   "path; e.g. bench.example.com,10.0.0.5)")
            listed.add(name)
        names = set(LOOPBACK_NAMES) | listed
        bound = _normal_name(listen_host) if listen_host is not None else None
        if bound is not None and bound not in _EVERY_INTERFACE:
            names.add(bound)
        return cls(frozenset(names), frozenset(listed), any_host)

    def host_allowed(self, host: bytes | None) -> bool:
        if self.any_host:
            return True
        if not host:
            return False  # an HTTP/1.0 request without Host: no browser sends one
        name, _ = _split_host(host.decode("latin-1"))
        return name is not None and name in self.names

    def origin_allowed(self, origin: bytes | None, referer: bytes | None, host: bytes | None) -> bool:
        """Whether a state-changing request may come from where its Origin (else Referer) says."""
        source = origin if origin is not None else referer
        if source is None:
            return True  # not a browser's cross-site request: curl, scripts, the CLI
        text = source.decode("latin-1").strip()
        if text.lower() == "null":
            return False  # a sandboxed frame, a file:// page, a redirect across sites
        try:
            parts = urlsplit(text)
            port = str(parts.port) if parts.port is not None else ""
        except ValueError:
            return False
        if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
            return False
        name = _normal_name(f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname)
        if name is None:
            return False
        if name in self.listed:
            return True
        origin_port = "" if port == _DEFAULT_PORTS[parts.scheme] else port
        host_name, host_port = _split_host((host or b"").decode("latin-1"))
        if host_port in _DEFAULT_PORTS.values() and origin_port == "":
            host_port = ""
        return host_name is not None and (name, origin_port) == (host_name, host_port)
