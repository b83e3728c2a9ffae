"""Read the protocol definition, the A-D instruction texts and the judge prompt.

Packaged texts come through importlib.resources; a user's own instruction set is a directory with
A.md, B.md, C.md, D.md (A may be absent: condition A has no instruction by design) and an optional
manifest.yaml giving its version.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from afpbench.reference.errors import AfpbenchError
from afpbench.reference.hashing import text_sha256

CONDITIONS = ("A", "B", "C", "D")


class ReferenceFileError(AfpbenchError, ValueError):
    """A reference file (instructions, judge prompt) that cannot be used; names the file."""


@dataclass(frozen=True)
class Instruction:
    condition: str
    text: str  # "" for A
    sha256: str


@dataclass(frozen=True)
class InstructionSet:
    name: str
    version: str
    by_condition: dict[str, Instruction]

    def text(self, condition: str) -> str:
        return self.by_condition[condition].text

    def hashes(self) -> dict[str, str]:
        return {c: i.sha256 for c, i in self.by_condition.items()}


def _packaged(name: str) -> str:
    return resources.files("afpbench.reference").joinpath(name).read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def protocol() -> dict[str, Any]:
    # protocol.yaml is a mapping of section name to YAML data of any shape.
    data: dict[str, Any] = yaml.safe_load(_packaged("protocol.yaml"))
    return data


def protocol_text() -> str:
    return _packaged("protocol.yaml")


def _normalise(text: str) -> str:
    # A file of only whitespace is an empty instruction; otherwise keep the text as written (LF endings).
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return "" if not text.strip() else text.rstrip("\n") + "\n"


def build_instruction_set(name: str, version: str, texts: dict[str, str]) -> InstructionSet:
    return InstructionSet(
        name=name,
        version=version,
        by_condition={c: Instruction(c, t, text_sha256(t)) for c, t in texts.items()},
    )


def load_instructions(directory: str | Path | None = None) -> InstructionSet:
    if directory is None:
        root = resources.files("afpbench.reference").joinpath("instructions")
        manifest = yaml.safe_load(root.joinpath("manifest.yaml").read_text(encoding="utf-8")) or {}
        texts = {c: _normalise(root.joinpath(f"{c}.md").read_text(encoding="utf-8")) for c in CONDITIONS}
        return build_instruction_set("afpbench-default", str(manifest.get("version", "unversioned")), texts)
    path = Path(directory)
    if not path.is_dir():
        raise ReferenceFileError(f"{directory}: instruction directory not found")
    texts = {}
    for c in CONDITIONS:
        f = path / f"{c}.md"
        if not f.exists():
            if c == "A":
                texts[c] = ""
                continue
            raise ReferenceFileError(f"{f}: missing instruction text for condition {c}")
        texts[c] = _normalise(f.read_text(encoding="utf-8"))
        if c != "A" and not texts[c]:
            raise ReferenceFileError(f"{f}: instruction text for condition {c} is empty")
    version = "unversioned"
    manifest_path = path / "manifest.yaml"
    if manifest_path.exists():
        version = str(
            (yaml.safe_load(manifest_path.read_text(encoding="utf-8")) or {}).get("version", version)
        )
    return build_instruction_set(str(path), version, texts)


def load_judge_prompt(path: str | Path | None = None) -> str:
    if path is None:
        return _normalise(_packaged("judge_prompt.md"))
    p = Path(path)
    if not p.is_file():
        raise ReferenceFileError(f"{path}: judge prompt file not found")
    return _normalise(p.read_text(encoding="utf-8"))
