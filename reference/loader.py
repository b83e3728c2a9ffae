"""Read the protocol definition, the A-D instruction texts and the judge prompt.

Packaged texts come through importlib.resources; a user's own instruction set is a directory with
A.md, B.md, C.md, D.md (A may be absent: condition A has no instruction by design) and an optional
manifest.yaml giving its version, or the same texts given inline (`instructions_from_texts`, one set of
rules for both). User files are read through reference/files.py (size cap, UTF-8 only).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from afpbench.reference.errors import AfpbenchError
from afpbench.reference.files import InputFileError, read_input_text, text_problem
from afpbench.reference.hashing import text_sha256
from afpbench.reference.protocol_facts import CONDITIONS


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


def instructions_from_texts(
    texts: dict[str, str | None], name: str, version: str, where: Callable[[str], str]
) -> InstructionSet:
    """An instruction set from its four texts, by the rules of a directory: A may be absent or empty
    (condition A has no instruction by design), B-D must have text. `where(condition)` names the text
    in messages (`instructions.inline.B`, `<dir>/B.md`)."""
    out: dict[str, str] = {}
    for c in CONDITIONS:
        raw = texts.get(c)
        if raw is not None and (problem := text_problem(raw)):
            raise ReferenceFileError(f"{where(c)}: instruction text {problem}")
        out[c] = _normalise(raw or "")
        if c != "A" and not out[c]:
            raise ReferenceFileError(f"{where(c)}: instruction text for condition {c} is missing or empty")
    return build_instruction_set(name, version, out)


def _read_reference(path: Path, where: str) -> str:
    try:
        return read_input_text(path)
    except InputFileError as exc:
        raise ReferenceFileError(f"{where}: {exc}") from None


def load_instructions(
    directory: str | Path | None = None, *, name: str | None = None, label: str | None = None
) -> InstructionSet:
    """The packaged A-D texts (None), or a directory's. `name` is what the set is recorded as (default:
    the directory path); `label` names it in messages (default: the path)."""
    if directory is None:
        root = resources.files("afpbench.reference").joinpath("instructions")
        manifest = yaml.safe_load(root.joinpath("manifest.yaml").read_text(encoding="utf-8")) or {}
        texts: dict[str, str] = {
            c: _normalise(root.joinpath(f"{c}.md").read_text(encoding="utf-8")) for c in CONDITIONS
        }
        return build_instruction_set("afpbench-default", str(manifest.get("version", "unversioned")), texts)
    path = Path(directory)
    where = label or str(directory)
    if not path.is_dir():
        raise ReferenceFileError(f"{where}: instruction directory not found")
    found: dict[str, str | None] = {}
    for c in CONDITIONS:
        f = path / f"{c}.md"
        found[c] = _read_reference(f, f"{where}/{c}.md") if f.exists() else None
    version = "unversioned"
    manifest_path = path / "manifest.yaml"
    if manifest_path.exists():
        manifest = yaml.safe_load(_read_reference(manifest_path, f"{where}/manifest.yaml")) or {}
        version = str(manifest.get("version", version)) if isinstance(manifest, dict) else version
    return instructions_from_texts(found, name or str(path), version, lambda c: f"{where}/{c}.md")


def judge_prompt_from_text(text: str, where: str = "judge_prompt.inline") -> str:
    """A judge prompt given as text, normalised like a file's; it must say something."""
    problem = text_problem(text)
    if problem:
        raise ReferenceFileError(f"{where}: judge prompt {problem}")
    prompt = _normalise(text)
    if not prompt:
        raise ReferenceFileError(f"{where}: judge prompt is empty")
    return prompt


def load_judge_prompt(path: str | Path | None = None, *, label: str | None = None) -> str:
    if path is None:
        return _normalise(_packaged("judge_prompt.md"))
    p = Path(path)
    where = label or str(path)
    if not p.is_file():
        raise ReferenceFileError(f"{where}: judge prompt file not found")
    return _normalise(_read_reference(p, where))
