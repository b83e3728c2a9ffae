"""The batch lane's HTTP: one request on the thread's pooled session (transport.py), its body as text.

A network fault or an error status raises BatchFault (masked of the key, at most 300 characters of the
provider's words), which the poller records on the batch and tries again at the next poll; only a
submission the provider refuses (4xx) fails the batch's entries.
"""

from __future__ import annotations

from typing import Any

import requests

from afpbench.workers.providers.transport import session_for
from afpbench.workers.providers.types import Endpoint, key_for_quiet
from afpbench.workers.redact import mask_secrets


class BatchFault(Exception):
    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status

    @property
    def refused(self) -> bool:
        """The provider refused the request itself (a 4xx other than 408/409/429): trying again is useless."""
        return self.status is not None and 400 <= self.status < 500 and self.status not in (408, 409, 429)


def batch_call(endpoint: Endpoint, method: str, url: str, headers: dict[str, str], **body: Any) -> str:
    """`body`: requests' json=, data=, files= or params= (a query). Returns the response text of a 2xx."""
    secrets = [k for k in (key_for_quiet(endpoint),) if k]
    session = session_for(endpoint.base_url or url)
    try:
        response = session.request(method, url, headers=headers, allow_redirects=False,
                                   timeout=(endpoint.connect_timeout_s, endpoint.timeout_s), **body)
    except requests.RequestException as exc:
        raise BatchFault(mask_secrets(f"{method} {url}: {type(exc).__name__}: {exc}", secrets)[:300]) from None
    if response.status_code >= 300:
        words = mask_secrets(response.text, secrets)[:300]
        raise BatchFault(f"{method} {url}: HTTP {response.status_code}: {words}", response.status_code)
    return response.text
