"""Before any row is written: can each model's endpoint be reached, with a key that works?

One cheap GET per endpoint (a model listing, never a paid completion). Unreachable endpoints, refused
keys (401/403; Gemini's 400 API_KEY_INVALID), unknown models (Anthropic and Gemini 404; a model an
OpenAI-compatible listing does not name) and a base URL that is not an API root (a listing that 404s,
redirects or is not a model list) stop the run with one line naming the model and what is wrong.

A listing that is a valid but empty list is let through with a warning: local servers that load one
model and serve it under any name (llama.cpp, some proxies) list nothing, and a wrong name still ends
in not_found at the first call, which stops the model and makes the run exit 3. Azure's v1 listing
names base models, not the deployments its `model` field takes, so it is not searched for the model.
5xx and 429 answers are passed too: they are transient, and the run's retry policy bounds them.
"""

from __future__ import annotations

import difflib
import logging

import requests

from afpbench.workers.errors import MissingKey, PreflightError
from afpbench.workers.providers import anthropic, gemini, openai_compat
from afpbench.workers.providers.families import provider
from afpbench.workers.providers.types import Endpoint, base_url_of, key_for, key_for_quiet
from afpbench.workers.redact import mask_secrets

log = logging.getLogger(__name__)
_ROOT_HINT = "base_url should be the API root, usually ending in /v1"


def _family(endpoint: Endpoint) -> str:
    return provider(endpoint.provider).family


def _probe(endpoint: Endpoint) -> tuple[str, dict[str, str]]:
    """The listing URL and auth headers, built from the same API roots the adapters post to."""
    key = key_for(endpoint)
    base = base_url_of(endpoint)
    headers: dict[str, str] = {}
    if _family(endpoint) == "anthropic":
        url = f"{anthropic.api_root(base)}/models/{endpoint.model}"
        if key:
            headers = {"x-api-key": key, "anthropic-version": anthropic.API_VERSION}
    elif _family(endpoint) == "gemini":
        url = f"{gemini.api_root(base)}/models/{gemini.model_id(endpoint.model)}"
        if key:
            headers = {"x-goog-api-key": key}
    else:
        url = f"{openai_compat.api_root(base)}/models"
        if key:
            headers = openai_compat.auth_headers(provider(endpoint.provider).auth_header, key)
    return url, headers


def preflight(endpoint: Endpoint, name: str, timeout_s: float = 10.0) -> None:
    """Check one endpoint; `name` is how messages name its model (the spec's display name)."""
    try:
        url, headers = _probe(endpoint)
    except MissingKey as exc:
        raise PreflightError(f"model {name}: {exc}") from None
    try:
        # Redirects are not followed: a redirect would leave the allowed base URL, and a key in a custom
        # header (x-api-key, api-key) would travel along.
        response = requests.get(url, headers=headers, timeout=timeout_s, allow_redirects=False)
    except requests.RequestException as exc:
        reason = type(exc).__name__
        raise PreflightError(f"model {name}: endpoint {url} unreachable ({reason})") from None
    # The bare key too, not only the header value ("Bearer <key>"): a server may echo the
    # key alone, and a key with no recognisable shape is then caught by nothing else.
    secrets = [v for v in (*headers.values(), key_for_quiet(endpoint)) if v]
    # Mask first, then cut: a key cut in half is recognised by no mask. The 64 KB window bounds the work.
    body = mask_secrets(response.text[:65536], secrets)[:300].replace("\n", " ")
    # Each refusal is a summary (status, URL, what to check) plus, apart, what the endpoint wrote: the
    # HTTP API answers with the summary only (PreflightError), the CLI prints both.
    if _key_refused(endpoint, response):
        raise PreflightError(
            f"model {name}: {response.status_code} from {url}: the API key was refused "
            f"(check {endpoint.api_key_env or 'the key variable'})",
            body[:160],
        )
    problem = _listing_problem(endpoint, name, url, response)
    if problem:
        summary, detail = problem if isinstance(problem, tuple) else (problem, "")
        raise PreflightError(f"model {name}: {summary}", mask_secrets(detail, secrets))


def _key_refused(endpoint: Endpoint, response: requests.Response) -> bool:
    if response.status_code in (401, 403):
        return True
    # Gemini answers a bad key with 400 INVALID_ARGUMENT, reason API_KEY_INVALID in its ErrorInfo.
    return _family(endpoint) == "gemini" and response.status_code == 400 and "API_KEY_INVALID" in response.text


def _listing_problem(endpoint: Endpoint, name: str, url: str,
                     response: requests.Response) -> str | tuple[str, str] | None:
    """What is wrong with the endpoint's answer, in one clause; None when the run may go on."""
    status = response.status_code
    if 300 <= status < 400:
        return f"{url} answered {status} (a redirect, not followed): {_ROOT_HINT}"
    if status == 404:
        if _family(endpoint) in ("anthropic", "gemini"):
            return f"unknown model {endpoint.model!r} at {url}"
        return f"no model listing at {url} (HTTP 404): {_ROOT_HINT}"
    if status == 429 or status >= 500:
        log.warning("model %s: preflight %s answered %s; going on (the retry policy bounds it)",
                    name, url, status)
        return None
    if status >= 400:
        return f"{status} from {url}: the endpoint refused the listing"
    if _family(endpoint) != "openai":
        return None  # Anthropic and Gemini answered for this very model; the simulator serves any name
    return _unlisted(endpoint, name, url, response)


def _unlisted(endpoint: Endpoint, name: str, url: str,
              response: requests.Response) -> str | tuple[str, str] | None:
    try:
        data = response.json().get("data")
        listed = [str(m["id"]) for m in data]
    except (ValueError, AttributeError, KeyError, TypeError):
        return f"{url} did not answer with a model list ({_content_type(response)}): {_ROOT_HINT}"
    if not listed:
        log.warning("model %s: %s lists no models; the model name cannot be checked before the run",
                    name, url)
        return None
    if not provider(endpoint.provider).lists_models:
        return None
    if endpoint.model in listed or f"{endpoint.model}:latest" in listed:  # Ollama's default tag
        return None
    # The listing is the endpoint's text: kept apart from the summary, so the HTTP API never returns it.
    return (f"unknown model {endpoint.model!r} at {url}",
            f"the endpoint lists {', '.join(_nearest(endpoint.model, listed))}")


def _nearest(name: str, listed: list[str]) -> list[str]:
    """The listed ids closest to the name, else the first few: a listing may hold hundreds."""
    close = difflib.get_close_matches(name, listed, n=8, cutoff=0.4)
    return close or sorted(listed)[:8]


def _content_type(response: requests.Response) -> str:
    kind = response.headers.get("content-type", "no content type").split(";")[0].strip()
    return f"HTTP {response.status_code}, {kind}"
