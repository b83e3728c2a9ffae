"""Type checking: mypy --strict on afpbench.scoring, afpbench.fixtures and afpbench.reference is clean,
and mypy's basic check on afpbench.workers and afpbench.api.

The folders install under one import name through setuptools' package-dir mapping (scoring/ ->
afpbench.scoring, ...), which mypy cannot follow from the source tree. So the test lays out a throwaway
tree <tmp>/afpbench/{scoring,fixtures,reference,workers,api} of symlinks to the repo folders (`afpbench`
stays a namespace package, as installed), points MYPYPATH at <tmp> and runs, from <tmp>:

    python -m mypy --config-file tests/mypy.ini -p afpbench.scoring -p afpbench.fixtures -p afpbench.reference

The configuration (strict, pydantic plugin) is tests/mypy.ini. The runtime layers, afpbench.workers and
afpbench.api, get the basic check: mypy's defaults plus the pydantic plugin (tests/mypy-basic.ini),

    python -m mypy --config-file tests/mypy-basic.ini -p afpbench.workers -p afpbench.api

mypy's cache lives outside the repo ($MYPY_CACHE_DIR, else <system temp>/afpbench-mypy-cache; one
sub-folder per configuration): a cold run takes a few seconds (the basic check about half a minute),
a warm one well under one.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "tests" / "mypy.ini"
BASIC_CONFIG = REPO / "tests" / "mypy-basic.ini"
# Installed as afpbench.<folder>; all are linked so that an import of any of them resolves.
FOLDERS = ("scoring", "fixtures", "reference", "workers", "api")
# Checked strictly (and shipped with a py.typed marker).
CHECKED = ("scoring", "fixtures", "reference")
# Checked with mypy's default settings.
BASIC = ("workers", "api")


def _cache_dir() -> Path:
    return Path(os.environ.get("MYPY_CACHE_DIR") or Path(tempfile.gettempdir()) / "afpbench-mypy-cache")


def _symlink_tree(root: Path) -> Path:
    package = root / "afpbench"
    package.mkdir(parents=True)
    for folder in FOLDERS:
        try:
            (package / folder).symlink_to(REPO / folder, target_is_directory=True)
        except OSError as exc:  # e.g. Windows without the symlink privilege
            pytest.skip(f"cannot create symlinks for the mypy tree: {exc}")
    return root


def _mypy(tmp_path: Path, config: Path, folders: tuple[str, ...], cache: str) -> None:
    """Run mypy on afpbench.<folder> for each folder through the symlink tree; assert a clean pass."""
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (it is in the dev extra: pip install -e '.[dev]')")
    root = _symlink_tree(tmp_path / "tree")
    env = {**os.environ, "MYPYPATH": str(root)}
    env.pop("PYTHONPATH", None)  # only the symlink tree and the interpreter's site-packages
    command = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(config),
        "--cache-dir",
        str(_cache_dir() / cache),  # one cache per configuration: options differ, so entries would not match
        *(arg for folder in folders for arg in ("-p", f"afpbench.{folder}")),
    ]
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    output = (done.stdout + done.stderr).strip()
    assert done.returncode == 0, f"mypy exited {done.returncode}:\n$ {' '.join(command[1:])}\n{output}"
    assert "Success" in output, output  # exit 0 without checking anything would be a broken setup


def test_mypy_strict_on_scoring_fixtures_reference(tmp_path: Path) -> None:
    """Rule: scoring/, fixtures/ and reference/ pass mypy --strict (issue #11 item 7)."""
    _mypy(tmp_path, CONFIG, CHECKED, "strict")


def test_mypy_basic_on_workers_and_api(tmp_path: Path) -> None:
    """Rule: workers/ and api/ pass mypy's default checks with the pydantic plugin (issue #11 item 7)."""
    try:
        importlib.metadata.distribution("celery-types")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("celery-types (stubs for celery and kombu) is not installed; it is in the dev extra")
    _mypy(tmp_path, BASIC_CONFIG, BASIC, "basic")


@pytest.mark.parametrize("folder", CHECKED)
def test_checked_packages_carry_py_typed(folder: str) -> None:
    """PEP 561: the marker tells type checkers of installed afpbench to use these annotations."""
    assert (REPO / folder / "py.typed").is_file()
