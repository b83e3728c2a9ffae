"""/docs works in a browser with a token set: the page, its assets and the OpenAPI document are public
(not secret), the assets are served by afpbench itself (no CDN: the page works offline), and the
document declares the bearer scheme so Swagger's Authorize button sends `Authorization: Bearer ...`.

Against a real `afpbench serve` process on loopback, with AFP_API_TOKEN set.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.conftest import REPO
from tests.serving import serve_process

TOKEN = "docs-page-token-4b1e9d"


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Iterator[str]:
    work: Path = tmp_path_factory.mktemp("docs")
    env = {**os.environ, "AFP_API_TOKEN": TOKEN, "AFP_DATABASE_URL": f"sqlite:///{work}/afpbench.db"}
    env.pop("AFP_BROKER_URL", None)
    with serve_process(env, work / "serve.log", cwd=work) as served:
        yield served.base


def _asset_urls(html: str) -> list[str]:
    return re.findall(r'(?:src|href)="([^"]+)"', html) + re.findall(r"url:\s*'([^']+)'", html)


def test_docs_page_is_public_and_references_only_local_assets(base):
    """Rule: /docs is served without the token and loads nothing from another host (works offline)."""
    page = requests.get(f"{base}/docs", timeout=10)
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    urls = _asset_urls(page.text)
    assert any(u.endswith("swagger-ui-bundle.js") for u in urls) and any(u.endswith(".css") for u in urls), urls
    remote = [u for u in urls if not u.startswith("/")]
    assert remote == [], f"the docs page references assets on other hosts: {remote}"
    assert "cdn" not in page.text.lower()
    for url in urls:
        asset = requests.get(f"{base}{url}", timeout=30)
        assert asset.status_code == 200 and asset.content, url
    js = requests.get(f"{base}{next(u for u in urls if u.endswith('swagger-ui-bundle.js'))}", timeout=30)
    assert "SwaggerUIBundle" in js.text and "javascript" in js.headers["content-type"]


def test_openapi_document_is_public_and_declares_the_bearer_scheme(base):
    """Rule: /openapi.json is public, and it names HTTP bearer auth on the protected routes (Authorize)."""
    doc = requests.get(f"{base}/openapi.json", timeout=10)
    assert doc.status_code == 200
    spec = doc.json()
    schemes = spec["components"]["securitySchemes"]
    bearer = [name for name, s in schemes.items() if s.get("type") == "http" and s.get("scheme") == "bearer"]
    assert bearer, schemes
    assert spec["paths"]["/sweeps"]["get"]["security"] == [{bearer[0]: []}]
    assert TOKEN not in doc.text


def test_the_api_itself_still_needs_the_token(base):
    """Rule: only the description is public; the data routes answer 401 without the bearer token."""
    assert requests.get(f"{base}/sweeps", timeout=10).status_code == 401
    ok = requests.get(f"{base}/sweeps", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert ok.status_code == 200 and ok.json()["total"] == 0


def test_the_assets_ship_with_the_package_not_the_network():
    """Rule: the Swagger UI files come from an installed package (swagger-ui-bundle), named in pyproject."""
    from swagger_ui_bundle import swagger_ui_path

    assert (Path(swagger_ui_path) / "swagger-ui-bundle.js").is_file()
    assert "swagger-ui-bundle" in (REPO / "pyproject.toml").read_text(encoding="utf-8")
