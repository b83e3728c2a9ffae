"""Before any row is written: can each model's endpoint be reached, with a key that works?

One cheap GET per endpoint (the adapter's `probe`: a model listing, never a paid completion). The rules
every family shares live here: unreachable, a refused key (401/403), a redirect (not followed), a
transient answer (5xx, 429: passed, the run's retry policy bounds them), any other refusal. What an
answer means beyond them — a 404 (an unknown model, or no listing: base_url is not the API root), a 2xx
(a listing that does not name the model, or is no listing at all), a bad key told otherwise — is the
family's: its adapter's `read_probe`. Each refusal stops the run with one line naming the model.

A listing that is a valid but empty list is let through with a warning: a wrong name still ends in
not_found at the first call, which stops the model and makes the run exit 3.
"""

from __future__ import annotations

import logging

import requests

from afpbench.workers.errors import MissingKey, PreflightError
from afpbench.workers.providers.families import adapter_for
from afpbench.workers.providers.types import Endpoint, ProbeAnswer, ProbeFinding, ProbeKind, key_for_quiet
from afpbench.workers.redact import mask_secrets

log = logging.getLogger(__name__)
_ROOT_HINT = "base_url should be the API root, usually ending in /v1"


def preflight(endpoint: Endpoint, name: str, timeout_s: float = 10.0) -> None:
    """Check one endpoint; `name` is how messages name its model (the spec's display name)."""
    adapter = adapter_for(endpoint.provider)
    try:
        probe = adapter.probe(endpoint)
    except MissingKey as exc:
        raise PreflightError(f"model {name}: {exc}") from None
    url = probe.url
    try:
        # Redirects are not followed: a redirect would leave the allowed base URL, and a key in a custom
        # header (x-api-key, api-key) would travel along.
        response = requests.get(url, headers=probe.headers, timeout=timeout_s, allow_redirects=False)
    except requests.RequestException as exc:
        reason = type(exc).__name__
        raise PreflightError(f"model {name}: endpoint {url} unreachable ({reason})") from None
    # The bare key too, not only the header value ("Bearer <key>"): a server may echo the
    # key alone, and a key with no recognisable shape is then caught by nothing else.
    secrets = [v for v in (*probe.headers.values(), key_for_quiet(endpoint)) if v]
    # Mask first, then cut: a key cut in half is recognised by no mask. The 64 KB window bounds the work.
    body = mask_secrets(response.text[:65536], secrets)[:300].replace("\n", " ")
    status = response.status_code
    finding = None if status in (401, 403) else adapter.read_probe(endpoint, ProbeAnswer(status, response.text))
    # Each refusal is a summary (status, URL, what to check) plus, apart, what the endpoint wrote: the
    # HTTP API answers with the summary only (PreflightError), the CLI prints both.
    if status in (401, 403) or (finding and finding.kind is ProbeKind.key_refused):
        raise PreflightError(
            f"model {name}: {status} from {url}: the API key was refused "
            f"(check {endpoint.api_key_env or 'the key variable'})",
            body[:160],
        )
    problem = _problem(endpoint, url, response, finding) if finding else _shared_problem(name, url, status)
    if problem:
        raise PreflightError(f"model {name}: {problem}", mask_secrets(finding.detail if finding else "", secrets))
    if finding and finding.kind is ProbeKind.unconfirmed:
        log.warning("model %s: %s lists no models; the model name cannot be checked before the run", name, url)


def _problem(endpoint: Endpoint, url: str, response: requests.Response, finding: ProbeFinding) -> str | None:
    """The summary of a family's finding, in one clause; None when the run may go on."""
    if finding.kind is ProbeKind.unknown_model:
        return f"unknown model {endpoint.model!r} at {url}"
    if finding.kind is ProbeKind.no_listing:
        return f"no model listing at {url} (HTTP {response.status_code}): {_ROOT_HINT}"
    if finding.kind is ProbeKind.not_a_listing:
        kind = response.headers.get("content-type", "no content type").split(";")[0].strip()
        return f"{url} did not answer with a model list (HTTP {response.status_code}, {kind}): {_ROOT_HINT}"
    return None


def _shared_problem(name: str, url: str, status: int) -> str | None:
    """What the rules every family shares make of a status, in one clause; None when the run may go on."""
    if 300 <= status < 400:
        return f"{url} answered {status} (a redirect, not followed): {_ROOT_HINT}"
    if status == 429 or status >= 500:
        log.warning("model %s: preflight %s answered %s; going on (the retry policy bounds it)", name, url, status)
        return None
    if status >= 400:
        return f"{status} from {url}: the endpoint refused the listing"
    return None
