"""Shared by the benchmarks that compare two code versions in one sitting: the options and the interpreters."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from harness import REPO, compile_bytecode


def add_version_options(ap: argparse.ArgumentParser, rounds: int) -> None:
    ap.add_argument("--rounds", type=int, default=rounds)
    ap.add_argument("--python", default=None, help="a second interpreter (another checkout) to compare, interleaved")
    ap.add_argument("--out", type=Path, default=None)


def interpreters(args: argparse.Namespace) -> dict[str, str]:
    """"this" (the interpreter running the benchmark) and, with --python, "other"; both checkouts
    compiled to bytecode first (harness.compile_bytecode)."""
    pythons = {"this": sys.executable} | ({"other": args.python} if args.python else {})
    return {name: compile_bytecode(python) for name, python in pythons.items()}


def probe_rounds(args: argparse.Namespace, probe: str, argv: list[str], timeout: float | None = None,
                 env_of: Callable[[str, int], dict[str, str] | None] = lambda _name, _round: None,
                 ) -> Iterator[dict]:
    """`probe` (Python source that prints one JSON object last) run in a fresh process under each
    interpreter in turn, `args.rounds` times: each run's figures with its code name and the load average
    before it. `env_of(name, round)` gives a run its environment (None: this one's)."""
    pythons = interpreters(args)
    for i in range(args.rounds):
        for name, python in pythons.items():
            load = os.getloadavg()[0]
            out = subprocess.run([python, "-c", probe, *argv], cwd=REPO, env=env_of(name, i), capture_output=True,
                                 text=True, check=True, timeout=timeout).stdout
            yield {"code": name, **json.loads(out.strip().splitlines()[-1]), "load_1m_before": load}


def medians_by_code(runs: list[dict], keys: Iterable[str], digits: int | None = None) -> dict[str, dict[str, float]]:
    """The median of each of `keys` over each code version's runs (as `probe_rounds` yields them), versions
    in run order; rounded to `digits` when given."""
    def median(values: Iterable[float]) -> float:
        m = statistics.median(values)
        return m if digits is None else round(m, digits)

    return {name: {k: median(r[k] for r in runs if r["code"] == name) for k in keys}
            for name in dict.fromkeys(r["code"] for r in runs)}
