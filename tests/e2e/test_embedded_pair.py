"""The embedded mode on two processes (workers/embedded_pair.py), run by the real CLI.

A big sweep without declared limits is shared between `afpbench run` and a forked second worker: each
cell must still be executed and scored exactly once, the outcome must be the one-process outcome, and
every way a run ends (the last cell, a killed second process, Ctrl-C, `afpbench cancel`) must leave no
process behind and no cell without its record. The simulated model is an in-process SimServer (its
answers are SIMULATED), so no fixed port is shared with anything else on the machine.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from afpbench.workers.embedded_pair import SPLIT_FROM_CELLS
from afpbench.workers.sim.server import FaultConfig, SimConfig, SimServer
from tests.conftest import interruptible
from tests.e2e.test_cli_errors import afpbench
from tests.security.test_valid_cancel import _attempts, _sql, _wait_until

REPEATS = 60  # P01 x conditions A-D x 60 repeats = 240 cells, above the split threshold
CELLS = 4 * REPEATS
TWO_PROCESSES = re.compile(r"embedded run on two processes: (\d+) threads here, (\d+) in process (\d+)")
assert CELLS >= SPLIT_FROM_CELLS


def _spec(path: Path, base_url: str, **model_extra) -> Path:
    spec = {"name": "two processes (simulated)", "judges": [], "conditions": ["A", "B", "C", "D"],
            "models": [{"provider": "sim", "model": "sim-1", "base_url": base_url, **model_extra}],
            "fixtures": {"only": ["P01"]}, "repeats": REPEATS, "high_risk_repeats": REPEATS}
    path.write_text(yaml.safe_dump(spec))
    return path


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[-1].split()[0] != "Z"  # a zombie is dead, only not yet reaped
    except FileNotFoundError:
        return False


def _every_cell_done_once(db: Path) -> None:
    """Each cell done with exactly one result and exactly one answered attempt: nothing ran twice."""
    assert _sql(db, "select count(*), sum(phase = 'done') from cell") == [(CELLS, CELLS)]
    assert _sql(db, "select count(*) from (select cell_id from result group by cell_id having count(*) != 1)") \
        == [(0,)], "a cell with no result or with two"
    answered = _sql(db, "select cell_id, count(*) from attempt where outcome not in ('interrupted', 'not_sent') "
                        "group by cell_id")
    assert len(answered) == CELLS and {n for _, n in answered} == {1}, "a cell answered twice, or not at all"


@pytest.fixture(scope="module")
def sim():
    with SimServer(SimConfig(faults=FaultConfig(latency_ms=20))).start() as server:
        yield server


@pytest.fixture(scope="module")
def both_runs(tmp_path_factory, sim) -> dict[str, tuple[Path, dict, str]]:
    """The same sweep run on two processes and, with AFP_EMBEDDED_PROCESSES=1, on one."""
    out = {}
    for name, env in (("two", {}), ("one", {"AFP_EMBEDDED_PROCESSES": "1"})):
        work = tmp_path_factory.mktemp(name)
        run = afpbench(["run", str(_spec(work / "spec.yaml", sim.base_url)), "--json", "--threads", "6"], work,
                       env=env, timeout=300)
        assert run.returncode == 0, run.stderr
        out[name] = (work / "afpbench.db", json.loads(run.stdout), run.stderr)
    return out


def test_a_big_sweep_without_limits_shares_its_threads_between_two_processes(both_runs):
    """Rule: --threads is shared out (3 + 3 here), so the endpoint never sees more calls at once than
    asked; the second process is gone when the command returns; one process is used when told."""
    _, _, stderr = both_runs["two"]
    shared = TWO_PROCESSES.search(stderr)
    assert shared, stderr
    assert (int(shared[1]), int(shared[2])) == (3, 3)
    assert not _alive(int(shared[3])), "the second worker process outlived the command"
    assert not TWO_PROCESSES.search(both_runs["one"][2])


def test_two_processes_run_and_score_each_cell_exactly_once(both_runs):
    """Rule: a cell has one result (the denominator counts it once): both processes claim through SQL,
    and an execute message lives in the process that owns its cell, so no cell is run twice."""
    _every_cell_done_once(both_runs["two"][0])


def test_two_processes_give_the_one_process_outcome(both_runs):
    """Rule: how many processes ran the sweep changes no result state, rate or count in its summary."""
    two, one = both_runs["two"][1], both_runs["one"][1]
    for key in ("cells", "done", "by_condition"):
        assert two[key] == one[key], key
    assert two["cells"] == CELLS


def test_a_sweep_with_declared_limits_stays_in_one_process(tmp_path, sim):
    """Rule: the limiter of the embedded mode is in memory; a declared rate or cap is counted in one
    place, so such a sweep is never shared out (it waits on its rate, not on a core)."""
    spec = _spec(tmp_path / "spec.yaml", sim.base_url, limits={"requests_per_min": 600000, "burst": 50})
    run = afpbench(["run", str(spec), "--json", "--threads", "6"], tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr
    assert not TWO_PROCESSES.search(run.stderr), run.stderr
    _every_cell_done_once(tmp_path / "afpbench.db")


def _start(tmp_path: Path, base_url: str, threads: int = 4) -> tuple[subprocess.Popen, int]:
    """`afpbench run` in its own session (so a test can send the terminal's Ctrl-C to its whole process
    group); returns it and its second process's pid, read from its first line."""
    env = {**os.environ, "AFP_DATABASE_URL": f"sqlite:///{tmp_path / 'afpbench.db'}", "AFP_BROKER_URL": "memory://"}
    spec = _spec(tmp_path / "spec.yaml", base_url)
    run = subprocess.Popen([sys.executable, "-m", "afpbench.api.cli", "run", str(spec), "--json", "--threads",
                            str(threads)], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, start_new_session=True, preexec_fn=interruptible)
    assert run.stderr is not None
    for line in run.stderr:
        shared = TWO_PROCESSES.search(line)
        if shared:
            return run, int(shared[3])
    run.wait(30)
    raise AssertionError(f"the run did not start a second process (exit {run.returncode})")


@pytest.fixture
def slow_sim():
    with SimServer(SimConfig(faults=FaultConfig(latency_ms=150))).start() as server:
        yield server


def test_a_killed_second_process_leaves_its_cells_to_the_first(tmp_path, slow_sim):
    """Rule: no cell is lost with a worker. The second process is killed mid-sweep: its calls in flight
    are recorded as interrupted, its open cells run in the first process, and the sweep completes with
    each cell answered once."""
    run, child = _start(tmp_path, slow_sim.base_url)
    db = tmp_path / "afpbench.db"
    try:
        _wait_until(lambda: _sql(db, "select count(*) from attempt where cell_id % 2 = 1 and outcome != 'started'")
                    [0][0] >= 5, 60, "the second process to answer a few cells")
        os.kill(child, signal.SIGKILL)
        out, err = run.communicate(timeout=240)
    finally:
        run.kill()
    assert run.returncode == 0, err
    assert "its cells run in this process" in err, err
    _every_cell_done_once(db)
    for cell_id, in _sql(db, "select cell_id from attempt where outcome = 'interrupted'"):
        assert _sql(db, "select count(*) from attempt where cell_id = ? and outcome = 'answer'", cell_id) == [(1,)]
    assert json.loads(out)["done"] == CELLS


def test_ctrl_c_stops_both_processes_at_once(tmp_path, slow_sim):
    """Rule: Ctrl-C (SIGINT to the terminal's process group) ends the run promptly with no process left
    behind: the second process ignores it, and the first kills it on the way out."""
    run, child = _start(tmp_path, slow_sim.base_url)
    try:
        _wait_until(lambda: _attempts(tmp_path / "afpbench.db") >= 8, 60, "calls under way")
        os.killpg(run.pid, signal.SIGINT)
        run.communicate(timeout=30)
    finally:
        run.kill()
    assert run.returncode != 0
    _wait_until(lambda: not _alive(child), 10, "the second process to go")


def test_cancel_stops_both_processes_and_records_their_calls_in_flight(tmp_path, slow_sim):
    """Rule: `afpbench cancel` stops a two-process run with exit 4; no try of either process is left
    'started' (each ends interrupted, to be run again by `resume`), and no process is left behind."""
    run, child = _start(tmp_path, slow_sim.base_url)
    db = tmp_path / "afpbench.db"
    try:
        _wait_until(lambda: _attempts(db) >= 8, 60, "calls under way")
        sweep_id = _sql(db, "select id from sweep")[0][0]
        cancel = afpbench(["cancel", sweep_id], tmp_path)
        assert cancel.returncode == 0, cancel.stderr
        _, err = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == 4, err
    assert not _alive(child)
    assert _sql(db, "select count(*) from attempt where outcome = 'started'") == [(0,)]
    assert _sql(db, "select count(*) from cell where phase in ('executing', 'scoring')") == [(0,)]
