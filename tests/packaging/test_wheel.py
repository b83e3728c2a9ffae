"""The wheel is tested: built from the repository, installed into a fresh venv outside the clone, run.

One wheel and one venv serve every check (module-scoped fixture). The build runs on a clean copy of the
working tree (no build/, *.egg-info or caches), so nothing stale from an in-tree build can leak into the
wheel and nothing is written into the clone. Dependencies come from the machine's pip configuration
(index, find-links, wheel cache). When the index cannot be reached the checks skip with pip's reason,
or fail under AFP_REQUIRE_SERVICES=1 (as in CI), like the other service-dependent tests.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import need

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
DIST = "afpbench"
# The repository's top-level folders that install as afpbench.<folder> (pyproject [tool.setuptools]).
PACKAGE_DIRS = ("api", "workers", "scoring", "fixtures", "reference")
# Files under PACKAGE_DIRS that deliberately do not ship, each with the reason: {"workers/x.txt": "why"}.
NOT_SHIPPED: dict[str, str] = {}
DEMO_CELLS = 56  # 5 general fixtures x 1 repeat + 3 high-risk fixtures x 3 repeats, per condition A-D
# Never copied into the build tree: build outputs, caches, local databases and run directories.
COPY_IGNORED = shutil.ignore_patterns(
    ".git", "build", "dist", "*.egg-info", "__pycache__", "*.py[co]", ".pytest_cache", ".ruff_cache",
    ".schemathesis", "node_modules", "*.db", "*.db-wal", "*.db-shm", "afpbench-runs", "celerybeat-schedule*",
)
# pip's words for "the index could not be reached" (it reports a missing index as no matching version).
UNREACHABLE = re.compile(
    r"NewConnectionError|Max retries exceeded|Temporary failure in name resolution|Name or service not known"
    r"|Network is unreachable|Connection refused|timed out|No matching distribution found"
    r"|Could not find a version that satisfies",
    re.I,
)


@dataclass(frozen=True)
class Installed:
    wheel: Path
    venv: Path
    base: Path  # the directory holding the build copy, the wheel and the venv

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def afpbench(self) -> Path:
        return self.venv / "bin" / "afpbench"

    def site_packages(self) -> Path:
        out = run([self.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
        return Path(out.stdout.strip())


def clean_env(**extra: str) -> dict[str, str]:
    """The environment minus every AFP_* setting and anything that would put the clone on sys.path."""
    dropped = {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "PYTHONSAFEPATH"}
    env = {k: v for k, v in os.environ.items() if not k.startswith("AFP_") and k not in dropped}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONNOUSERSITE="1", **extra)
    return env


def run(argv: list, *, cwd: Path | None = None, timeout: float = 300, check: bool = True,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env or clean_env(), capture_output=True, text=True, timeout=timeout
    )
    if check and proc.returncode != 0:
        pytest.fail(f"`{' '.join(map(str, argv))}` exited {proc.returncode}:\n{tail(proc)}", pytrace=False)
    return proc


def tail(proc: subprocess.CompletedProcess, lines: int = 25) -> str:
    # pip's warnings about this machine's unused local index entries are noise here.
    kept = [line for line in (proc.stdout + proc.stderr).splitlines() if "is ignored: it is neither" not in line]
    return "\n".join(kept[-lines:])


def pip(python: Path | str, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """`python -m pip ARGS`; an unreachable index skips (or fails under AFP_REQUIRE_SERVICES=1)."""
    proc = run([python, "-m", "pip", *args], timeout=timeout, check=False)
    if proc.returncode != 0:
        why = [line.strip() for line in (proc.stdout + proc.stderr).splitlines() if UNREACHABLE.search(line)]
        if why:
            need("the package index (PyPI)", f"`pip {args[0]}` failed: " + " | ".join(dict.fromkeys(why[:3])))
        pytest.fail(f"`pip {' '.join(args)}` exited {proc.returncode}:\n{tail(proc)}", pytrace=False)
    return proc


def _ignore(directory: str, names: list[str]) -> set[str]:
    ignored = set(COPY_IGNORED(directory, names))
    # Any virtualenv inside the clone (.venv, .ci-venv, ...): recognised by its pyvenv.cfg.
    ignored |= {n for n in names if (Path(directory) / n / "pyvenv.cfg").is_file()}
    return ignored


def build_wheel(source: Path, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    # Build isolation fetches the build backend (setuptools) through the index, like any user's build.
    pip(sys.executable, "wheel", "--no-deps", "-q", "-w", str(out), str(source), timeout=600)
    wheels = sorted(out.glob(f"{DIST}-*.whl"))
    assert len(wheels) == 1, f"expected one {DIST} wheel in {out}, found {[w.name for w in wheels]}"
    return wheels[0]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Iterator[Installed]:
    base = tmp_path_factory.mktemp("wheel")
    assert not base.resolve().is_relative_to(REPO), "the test venv must live outside the clone"
    source = base / "src"
    shutil.copytree(REPO, source, ignore=_ignore, symlinks=True)
    wheel = build_wheel(source, base / "dist")
    venv = base / "venv"
    try:
        run([sys.executable, "-m", "venv", venv], timeout=300)
        installed = Installed(wheel, venv, base)
        pip(installed.python, "install", "-q", str(wheel))
        yield installed
    finally:  # ~370 MB with its dependencies; pytest keeps the last three base temp dirs (the wheel stays)
        shutil.rmtree(venv, ignore_errors=True)
        shutil.rmtree(source, ignore_errors=True)


@pytest.fixture(scope="module")
def wheel_names(installed) -> list[str]:
    with zipfile.ZipFile(installed.wheel) as zf:
        return zf.namelist()


def dist_info(names: list[str]) -> str:
    (info,) = {n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")}
    return info


def empty_dir(tmp_path: Path, name: str = "empty") -> Path:
    path = tmp_path / name
    path.mkdir()
    return path


def test_demo_runs_from_an_empty_directory_with_the_installed_wheel(installed, tmp_path):
    cwd = empty_dir(tmp_path)
    proc = run([installed.afpbench, "run", "--json"], cwd=cwd, timeout=600)
    try:
        summary = json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"`afpbench run --json` did not print JSON:\n{tail(proc)}", pytrace=False)
    assert summary["simulated"] is True
    assert summary["cells"] == DEMO_CELLS, summary
    assert summary["done"] == DEMO_CELLS and summary["by_phase"] == {"done": DEMO_CELLS}, summary["by_phase"]
    assert summary["status"] == "complete", summary["status"]
    assert sum(summary["by_state"].values()) == DEMO_CELLS, summary["by_state"]
    # AFP_DATABASE_URL unset: the default SQLite file, in the working directory.
    assert summary["database"] == "sqlite:///afpbench.db"
    assert (cwd / "afpbench.db").is_file()


def test_the_venv_imports_afpbench_from_its_own_site_packages_not_the_clone(installed, tmp_path):
    code = (
        "import json, afpbench, afpbench.api.cli, afpbench.workers, afpbench.scoring, afpbench.fixtures, "
        "afpbench.reference; from importlib import resources; "
        "print(json.dumps({'path': list(afpbench.__path__), 'file': getattr(afpbench, '__file__', None), "
        "'data': str(resources.files('afpbench.fixtures').joinpath('pilot'))}))"
    )
    found = json.loads(run([installed.python, "-c", code], cwd=empty_dir(tmp_path)).stdout)
    site = installed.site_packages()
    assert found["path"] == [str(site / "afpbench")], found
    assert found["file"] is None, "afpbench is meant to be a namespace package (no afpbench/__init__.py)"
    assert Path(found["data"]).is_relative_to(site)


def test_the_wheel_installs_exactly_one_top_level_name(installed, wheel_names):
    info = dist_info(wheel_names)
    assert re.fullmatch(rf"{DIST}-[^/]+\.dist-info", info), info
    with zipfile.ZipFile(installed.wheel) as zf:
        top_level = zf.read(f"{info}/top_level.txt").decode().split()
    assert top_level == [DIST], f"top_level.txt lists {top_level}"
    outside = [n for n in wheel_names if not (n.startswith(f"{DIST}/") or n.startswith(f"{info}/"))]
    assert not outside, f"files outside {DIST}/ and {info}/: {outside[:20]}"
    assert f"{DIST}/__init__.py" not in wheel_names, "afpbench is a namespace package; it has no __init__.py"


def repository_package_files() -> list[str]:
    """Tracked files under PACKAGE_DIRS plus new files about to be committed (untracked, not ignored)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed: cannot list the repository's files")
    top = subprocess.run(["git", "-C", REPO, "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if top.returncode != 0 or Path(top.stdout.strip()).resolve() != REPO:
        pytest.skip(f"{REPO} is not a git checkout (an sdist or a copy): cannot list the repository's files")
    listed = subprocess.run(
        ["git", "-C", REPO, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *PACKAGE_DIRS],
        capture_output=True, text=True, check=True,
    ).stdout
    # A tracked file deleted in the working tree is not part of what the wheel is built from.
    return sorted({f for f in listed.split("\0") if f and (REPO / f).is_file()})


def test_every_repository_file_of_the_packages_is_in_the_wheel(wheel_names):
    files = repository_package_files()
    assert files, f"git lists no files under {PACKAGE_DIRS}"
    stale = set(NOT_SHIPPED) - set(files)
    assert not stale, f"NOT_SHIPPED names files that no longer exist: {sorted(stale)}"
    in_wheel = {n.removeprefix(f"{DIST}/") for n in wheel_names if n.startswith(f"{DIST}/")}
    missing = [f for f in files if f not in in_wheel and f not in NOT_SHIPPED]
    assert not missing, (
        f"{len(missing)} file(s) of the packages are not in the wheel (add them to "
        f"[tool.setuptools.package-data] / packages in pyproject.toml, or to NOT_SHIPPED with a reason): {missing}"
    )
    extra = sorted(in_wheel - set(files))
    assert not extra, f"the wheel ships files that are not in the repository: {extra}"


def test_the_docker_build_context_builds_the_same_wheel(installed, wheel_names, tmp_path):
    """infra/Dockerfile builds the wheel from only what it COPYs: that must be enough for the same wheel."""
    text = (REPO / "infra" / "Dockerfile").read_text()
    sources = [s for line in re.findall(r"^COPY (?!--from=)(.+) \S+$", text, re.M) for s in line.split()]
    assert "pyproject.toml" in sources, "the Dockerfile's build stage does not copy pyproject.toml"
    context = tmp_path / "context"
    context.mkdir()
    for s in sources:
        src = REPO / s
        if src.is_dir():
            shutil.copytree(src, context / s, ignore=_ignore)
        else:
            shutil.copy2(src, context / s)
    with zipfile.ZipFile(build_wheel(context, tmp_path / "dist")) as zf:
        docker_names = zf.namelist()
    assert sorted(n for n in docker_names if n.startswith(f"{DIST}/")) == sorted(
        n for n in wheel_names if n.startswith(f"{DIST}/")
    ), "the Dockerfile's COPY set builds a different wheel than the repository"


def test_the_unrelated_pypi_fixtures_project_lives_beside_afpbench(installed, tmp_path):
    """`fixtures` on PyPI is a top-level package; afpbench's fixtures are afpbench.fixtures: no clash,
    in either direction, and uninstalling afpbench leaves the other project intact."""
    cwd = empty_dir(tmp_path)
    pip(installed.python, "install", "-q", "fixtures")
    both = ("import fixtures, afpbench.fixtures.loader as ours; fixtures.Fixture; "
            "assert 'afpbench' not in fixtures.__file__, fixtures.__file__; print(ours.__name__)")
    assert run([installed.python, "-c", both], cwd=cwd).stdout.strip() == "afpbench.fixtures.loader"
    validated = run([installed.afpbench, "fixtures", "validate"], cwd=cwd)
    assert "P01" in validated.stdout, tail(validated)
    try:
        pip(installed.python, "uninstall", "-y", "-q", DIST)
        run([installed.python, "-c", "import fixtures; fixtures.Fixture"], cwd=cwd)
        gone = run([installed.python, "-c", "import afpbench.api"], cwd=cwd, check=False)
        assert gone.returncode != 0 and "ModuleNotFoundError" in gone.stderr, tail(gone)
        assert not installed.afpbench.exists(), "the afpbench console script survived the uninstall"
        site = installed.site_packages()
        # An empty afpbench/ directory may stay (pip does not record a namespace package's directory).
        left = [str(p.relative_to(site)) for p in (site / DIST).rglob("*") if p.is_file()]
        assert not left, f"files left behind by `pip uninstall afpbench`: {left[:20]}"
    finally:  # the venv is shared by the module: put afpbench back for any check that runs after this one
        pip(installed.python, "install", "-q", "--no-deps", "--force-reinstall", str(installed.wheel))
