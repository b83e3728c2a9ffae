"""The pre-registration seal: before any request, hash everything that decides a result.

Components: the resolved spec (no secrets are ever in it), each fixture file, each instruction text,
the protocol definition, the judge prompt, the pass and dispute rules, and the afpbench version.
Inputs given inline or by catalogue name are sealed like files: by their text (inline fixtures as the
`inline-<index>.yaml` files they become, workers/sweeps/inputs.py), and inline ones also with the spec.
Text is hashed after line-ending normalisation (reference/hashing.py). `verify` recomputes each
component from the current inputs and names any that changed.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from afpbench.fixtures.loader import FixtureFile
from afpbench.reference.hashing import json_sha256, text_sha256
from afpbench.reference.loader import InstructionSet, protocol_text
from afpbench.workers.sweeps.spec import SweepSpec


@functools.lru_cache(maxsize=1)
def afpbench_version() -> str:
    try:
        return version("afpbench")
    except PackageNotFoundError:  # running from a source tree without install
        return "0.0.0+source"


@dataclass(frozen=True)
class SealInputs:
    spec: SweepSpec
    fixture_files: Iterable[FixtureFile]  # in file order; iterated once
    instructions: InstructionSet
    judge_prompt: str


def seal_components(inputs: SealInputs) -> dict[str, Any]:
    resolved = inputs.spec.resolved()
    return {
        "spec": json_sha256(resolved),
        "fixtures": {f.name: text_sha256(f.text) for f in inputs.fixture_files},
        "instructions": {"version": inputs.instructions.version, **inputs.instructions.hashes()},
        "protocol": text_sha256(protocol_text()),
        "judge_prompt": text_sha256(inputs.judge_prompt),
        "pass_rule": json_sha256(resolved["pass_rule"]),
        "dispute_rule": json_sha256(resolved["dispute_rule"]),
        "afpbench_version": afpbench_version(),
    }


def seal_hash(components: dict[str, Any]) -> str:
    return json_sha256(components)


def changed_components(sealed: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """Names of the components (down to single files) whose hash differs."""
    changed: list[str] = []
    for name in sorted(set(sealed) | set(current)):
        old, new = sealed.get(name), current.get(name)
        if isinstance(old, dict) and isinstance(new, dict):
            for sub in sorted(set(old) | set(new)):
                if old.get(sub) != new.get(sub):
                    changed.append(f"{name}/{sub}")
        elif old != new:
            changed.append(name)
    return changed
