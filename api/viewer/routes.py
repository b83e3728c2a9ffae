"""The viewer's router, mounted by api/http/app.py: every page under /view."""

from __future__ import annotations

from fastapi import APIRouter

from afpbench.api.viewer import pages_auth, pages_cells, pages_sweeps
from afpbench.api.viewer.html import PREFIX

router = APIRouter(prefix=PREFIX, include_in_schema=False)
for _pages in (pages_auth, pages_sweeps, pages_cells):
    router.include_router(_pages.router)
