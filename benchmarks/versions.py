"""Shared by the benchmarks that compare two code versions in one sitting: the options and the interpreters."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness import compile_bytecode


def add_version_options(ap: argparse.ArgumentParser, rounds: int) -> None:
    ap.add_argument("--rounds", type=int, default=rounds)
    ap.add_argument("--python", default=None, help="a second interpreter (another checkout) to compare, interleaved")
    ap.add_argument("--out", type=Path, default=None)


def interpreters(args: argparse.Namespace) -> dict[str, str]:
    """"this" (the interpreter running the benchmark) and, with --python, "other"; both checkouts
    compiled to bytecode first (harness.compile_bytecode)."""
    pythons = {"this": sys.executable} | ({"other": args.python} if args.python else {})
    return {name: compile_bytecode(python) for name, python in pythons.items()}
