"""Which base URLs a spec may name.

Everywhere (CLI and API): http(s) with a host, and no user info, query string or fragment. A `?x=`
suffix turns "{base}/models" into any path of any internal server, so a query is never part of a base.

Specs posted to the HTTP API also have to name an allowed base: the providers' default base URLs
(families.PROVIDERS) and AFP_SIM_URL, which is what `base_url: null` means anyway, and the operator's
AFP_ALLOWED_BASE_URLS (comma-separated URLs). A base matches an entry with the same scheme, host and
port whose path is the entry's path or below it, at a `/` boundary. A posted base may not hide its path
behind `.`/`..` segments or percent-escapes, which servers resolve after the prefix was checked.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from afpbench.workers.errors import SettingError
from afpbench.workers.providers.families import PROVIDERS
from afpbench.workers.settings import get_settings

SETTING = "AFP_ALLOWED_BASE_URLS"
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Origin:
    scheme: str
    host: str
    port: int
    path: str  # no trailing '/'; "" matches every path

    def admits(self, other: Origin) -> bool:
        same_origin = (self.scheme, self.host, self.port) == (other.scheme, other.host, other.port)
        return same_origin and (not self.path or other.path == self.path or other.path.startswith(self.path + "/"))

    def __str__(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}{self.path}"


def _split(url: str) -> tuple[SplitResult | None, str | None]:
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in url) or "\\" in url:
        return None, "contains whitespace, a control character or a backslash"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError:
        return None, "is not a valid URL"
    return parts, None


def base_url_problem(url: str) -> str | None:
    """What is wrong with a base URL anywhere (CLI or API), or None."""
    parts, problem = _split(url)
    if parts is None:
        return problem
    if parts.scheme not in _DEFAULT_PORTS:
        return "must start with http:// or https://"
    if not parts.hostname:
        return "has no host"
    if "@" in parts.netloc:
        return "may not contain user info (user:password@); name the key in api_key_env"
    if "?" in url or parts.query:
        return "may not contain a query string ('?')"
    if "#" in url or parts.fragment:
        return "may not contain a fragment ('#')"
    return None


def origin_of(url: str) -> Origin:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return Origin(scheme, (parts.hostname or "").lower(), parts.port or _DEFAULT_PORTS[scheme],
                  parts.path.rstrip("/"))


def allowed_origins(setting: str | None, sim_url: str) -> tuple[Origin, ...]:
    """The providers' defaults, the sim, and the entries of an AFP_ALLOWED_BASE_URLS value."""
    defaults = [p.default_base_url for p in PROVIDERS.values() if p.default_base_url] + [sim_url]
    listed = [u.strip() for u in (setting or "").split(",") if u.strip()]
    for url in listed:
        problem = base_url_problem(url)
        if problem:
            raise SettingError(f"{SETTING}: entry {url!r} {problem}")
    return tuple(origin_of(url) for url in [*defaults, *listed] if not base_url_problem(url))


def api_refusal(url: str) -> str | None:
    """Why an API-posted spec may not use this base URL, or None. Assumes base_url_problem passed."""
    path = urlsplit(url).path
    if "%" in path or any(seg in (".", "..") for seg in path.split("/")):
        return "may not contain '.' or '..' path segments or percent-escapes"
    settings = get_settings()
    allowed = allowed_origins(settings.allowed_base_urls, settings.sim_url)
    if any(o.admits(origin_of(url)) for o in allowed):
        return None
    return (f"is not a provider's default base URL, AFP_SIM_URL or in {SETTING} on this server "
            "(its operator can allow it there)")
