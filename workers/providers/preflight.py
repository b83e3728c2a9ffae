"""Before any row is written: can each model's endpoint be reached, with a key that works?

One cheap GET per endpoint (a model listing, never a paid completion). Unreachable endpoints, 401/403
and unknown models stop the run with one line naming the model and what is wrong.
"""

from __future__ import annotations

import requests

from afpbench.workers.errors import MissingKey, PreflightError
from afpbench.workers.providers.endpoints import endpoint_for
from afpbench.workers.providers.types import key_for, key_for_quiet
from afpbench.workers.redact import mask_secrets
from afpbench.workers.sweeps.spec import ModelSpec


def _probe(model: ModelSpec) -> tuple[str, dict[str, str]]:
    endpoint = endpoint_for(model)
    key = key_for(endpoint)
    base = endpoint.base_url
    headers: dict[str, str] = {}
    if model.family == "anthropic":
        url = f"{base}/v1/models/{model.model}"
        if key:
            headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
    elif model.family == "gemini":
        url = f"{base}/v1beta/models/{model.model}"
        if key:
            headers = {"x-goog-api-key": key}
    else:
        url = f"{base}/models"
        if key:
            headers = {"Authorization": f"Bearer {key}"}
    return url, headers


def preflight(model: ModelSpec, timeout_s: float = 10.0) -> None:
    try:
        url, headers = _probe(model)
    except MissingKey as exc:
        raise PreflightError(f"model {model.display}: {exc}") from None
    try:
        # Redirects are not followed (as in transport.py): a redirect would leave the allowed base URL.
        response = requests.get(url, headers=headers, timeout=timeout_s, allow_redirects=False)
    except requests.RequestException as exc:
        reason = type(exc).__name__
        raise PreflightError(f"model {model.display}: endpoint {url} unreachable ({reason})") from None
    # The bare key too, not only the header value ("Bearer <key>"): a server may echo the
    # key alone, and a key with no recognisable shape is then caught by nothing else.
    secrets = [v for v in (*headers.values(), key_for_quiet(endpoint_for(model))) if v]
    # Mask first, then cut: a key cut in half is recognised by no mask. The 64 KB window bounds the work.
    body = mask_secrets(response.text[:65536], secrets)[:300].replace("\n", " ")
    # Each refusal is a summary (status, URL, what to check) plus, apart, what the endpoint wrote: the
    # HTTP API answers with the summary only (PreflightError), the CLI prints both.
    if 300 <= response.status_code < 400:
        raise PreflightError(
            f"model {model.display}: {response.status_code} redirect from {url}, which afpbench does not "
            "follow: give the final address as base_url"
        )
    if response.status_code in (401, 403):
        raise PreflightError(
            f"model {model.display}: {response.status_code} from {url}: the API key was refused "
            f"(check {model.api_key_env or 'the key variable'})",
            body[:160],
        )
    if response.status_code == 404 and model.family in ("anthropic", "gemini"):
        raise PreflightError(f"model {model.display}: unknown model {model.model!r} at {url}")
    if response.status_code == 200 and model.family == "openai":
        try:
            listed = [m.get("id") for m in response.json().get("data", [])]
        except (ValueError, AttributeError):
            listed = []
        if listed and model.model not in listed and model.provider == "openai":
            shown = mask_secrets(", ".join(sorted(str(m) for m in listed)[:8]), secrets)
            raise PreflightError(
                f"model {model.display}: unknown model {model.model!r} at {url}", f"the endpoint lists {shown}"
            )
