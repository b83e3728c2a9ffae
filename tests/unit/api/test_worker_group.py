"""`afpbench worker --processes N` (api/worker_group.py): real child processes, real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from afpbench.api.worker_group import node_names

# A stand-in for one worker process: it records its pid, exits 0 on SIGTERM / SIGINT (warm shutdown)
# and, told so by a file, dies on its own once (a worker killed from outside).
CHILD = textwrap.dedent("""
    import os, signal, sys, time
    from pathlib import Path
    folder, name = Path(sys.argv[1]), sys.argv[2]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(0))
    with open(folder / f"{name}.pids", "a") as f:
        f.write(f"{os.getpid()}\\n")
    if (folder / "fail-at-start").exists():
        sys.exit(3)
    while True:
        if (folder / f"{name}.die").exists():
            (folder / f"{name}.die").unlink()
            sys.exit(1)
        time.sleep(0.05)
""")

GROUP = textwrap.dedent("""
    import sys
    from afpbench.api.worker_group import run_group
    folder, child = sys.argv[1], sys.argv[2]
    children = [[sys.executable, child, folder, "a"], [sys.executable, child, folder, "b"]]
    sys.exit(run_group(children, poll_s=0.05, failed_at_start_s=1.0))
""")


def _start(tmp_path: Path) -> subprocess.Popen:
    (tmp_path / "child.py").write_text(CHILD)
    (tmp_path / "group.py").write_text(GROUP)
    return subprocess.Popen([sys.executable, str(tmp_path / "group.py"), str(tmp_path), str(tmp_path / "child.py")],
                            stderr=subprocess.PIPE, text=True)


def _pids(tmp_path: Path, name: str) -> list[int]:
    path = tmp_path / f"{name}.pids"
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def _wait_for(condition, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_node_names_are_distinct_and_keep_the_host_part():
    assert node_names("exec@%h", 3) == ["exec-1@%h", "exec-2@%h", "exec-3@%h"]
    assert node_names(None, 2) == ["afpbench-1@%h", "afpbench-2@%h"]


def test_a_child_that_dies_is_started_again_and_sigterm_stops_every_child(tmp_path):
    group = _start(tmp_path)
    _wait_for(lambda: _pids(tmp_path, "a") and _pids(tmp_path, "b"))
    first_b = _pids(tmp_path, "b")[0]
    time.sleep(1.5)  # past the start-up window (1 s here): a worker dying mid-run, not failing to start
    (tmp_path / "b.die").touch()
    _wait_for(lambda: len(_pids(tmp_path, "b")) == 2)
    assert not _alive(first_b) or subprocess.run(["ps", "-o", "stat=", "-p", str(first_b)],
                                                 capture_output=True, text=True).stdout.startswith("Z")
    group.send_signal(signal.SIGTERM)
    assert group.wait(20) == 0, group.stderr.read()
    assert "starting it again" in group.stderr.read()
    for pid in [*_pids(tmp_path, "a"), _pids(tmp_path, "b")[-1]]:
        assert not _alive(pid), f"child {pid} outlived its group"


def test_children_failing_at_start_stop_the_group_with_their_status(tmp_path):
    (tmp_path / "fail-at-start").touch()
    group = _start(tmp_path)
    assert group.wait(20) == 3
    assert "at start" in group.stderr.read()
    assert len(_pids(tmp_path, "a")) == 1, "a child failing at start is not restarted"
