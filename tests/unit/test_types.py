"""Type checking: mypy --strict on afpbench.scoring, afpbench.fixtures and afpbench.reference is clean.

The folders install under one import name through setuptools' package-dir mapping (scoring/ ->
afpbench.scoring, ...), which mypy cannot follow from the source tree. So the test lays out a throwaway
tree <tmp>/afpbench/{scoring,fixtures,reference,workers,api} of symlinks to the repo folders (`afpbench`
stays a namespace package, as installed), points MYPYPATH at <tmp> and runs, from <tmp>:

    python -m mypy --config-file tests/mypy.ini -p afpbench.scoring -p afpbench.fixtures -p afpbench.reference

The configuration (strict, pydantic plugin) is tests/mypy.ini. mypy's cache lives outside the repo
($MYPY_CACHE_DIR, else <system temp>/afpbench-mypy-cache): a cold run takes a few seconds, a warm one
well under one.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "tests" / "mypy.ini"
# Installed as afpbench.<folder>; all are linked so that an import of any of them resolves.
FOLDERS = ("scoring", "fixtures", "reference", "workers", "api")
# Checked strictly (and shipped with a py.typed marker).
CHECKED = ("scoring", "fixtures", "reference")


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


def test_mypy_strict_on_scoring_fixtures_reference(tmp_path: Path) -> None:
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
        str(CONFIG),
        "--cache-dir",
        str(_cache_dir()),
        *(arg for folder in CHECKED for arg in ("-p", f"afpbench.{folder}")),
    ]
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    output = (done.stdout + done.stderr).strip()
    assert done.returncode == 0, f"mypy exited {done.returncode}:\n$ {' '.join(command[1:])}\n{output}"
    assert "Success" in output, output  # exit 0 without checking anything would be a broken setup


@pytest.mark.parametrize("folder", CHECKED)
def test_checked_packages_carry_py_typed(folder: str) -> None:
    """PEP 561: the marker tells type checkers of installed afpbench to use these annotations."""
    assert (REPO / folder / "py.typed").is_file()
