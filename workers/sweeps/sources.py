"""Where a sweep's inputs come from: fixtures, the A-D instruction texts and the judge prompt.

Three ways, for each of them (none given: the packaged set):

- `inline`: the data itself, in the spec. Read, checked, stored and sealed exactly like a file's text.
- `name`: an entry of the server's catalogue, a directory the operator configures (AFP_CATALOGUE_DIR):
  `fixtures/<name>/*.yaml`, `instructions/<name>/{A,B,C,D}.md` (+ `manifest.yaml`),
  `judge_prompts/<name>.md`.
- a path (`dir`, or `judge_prompt` as a string): spec files only. Relative paths are read next to the
  spec file; with AFP_CATALOGUE_DIR set, a path must resolve inside the spec file's directory or the
  catalogue. Specs posted to the HTTP API may not name paths at all (api/http/posted_spec.py): the
  server's files are not the client's to read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from afpbench.fixtures.loader import FixtureError
from afpbench.reference.files import text_problem
from afpbench.reference.loader import ReferenceFileError
from afpbench.workers.errors import SettingError, SpecError
from afpbench.workers.settings import get_settings
from afpbench.workers.spec_values import Line

# Names of catalogue entries: one path segment, never '.' or '..'.
CATALOGUE_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
CATALOGUE_SETTING = "AFP_CATALOGUE_DIR"
# field of the spec -> (subdirectory of the catalogue, suffix of an entry; "" = a directory)
CATALOGUE_LAYOUT = {"fixtures": ("fixtures", ""), "instructions": ("instructions", ""),
                    "judge_prompt": ("judge_prompts", ".md")}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _inline_problem(data: Any, path: str) -> str | None:
    """Where inline data holds text no input file could (NUL, a lone surrogate), and what."""
    if isinstance(data, str):
        problem = text_problem(data)
        return f"{path}: {problem}" if problem else None
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for k, v in items:
        found = _inline_problem(str(k), path) or _inline_problem(v, f"{path}.{k}")
        if found:
            return found
    return None


def _one_source(source: BaseModel, kinds: tuple[str, ...]) -> None:
    given = [k for k in kinds if getattr(source, k) is not None]
    if len(given) > 1:
        raise ValueError(f"give one of {', '.join(kinds)} (or none, for the packaged set), not {' and '.join(given)}")


class FixtureSource(_Strict):
    """Where the fixtures come from: none of the three = the packaged pilot set P01-P08."""

    dir: Line | None = Field(default=None, description="a directory of *.yaml fixture files (spec files only)")
    name: str | None = Field(default=None, pattern=CATALOGUE_NAME,
                             description="an entry of the server's catalogue: AFP_CATALOGUE_DIR/fixtures/<name>/")
    inline: list[dict[str, Any]] | None = Field(
        default=None, min_length=1, max_length=1000, description="the fixtures themselves, as data"
    )
    only: list[Line] | None = Field(default=None, min_length=1)  # None: all; [] would be an empty sweep

    @field_validator("inline")
    @classmethod
    def _inline_text(cls, v: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        problem = _inline_problem(v, "inline") if v is not None else None
        if problem:
            raise ValueError(problem)
        return v

    @model_validator(mode="after")
    def _one_kind(self) -> FixtureSource:
        _one_source(self, ("dir", "name", "inline"))
        return self


class InlineInstructions(_Strict):
    """The A-D texts themselves. A is the protocol's no-instruction condition: leave it empty."""

    A: str = ""
    B: str
    C: str
    D: str

    @model_validator(mode="after")
    def _texts(self) -> InlineInstructions:
        problem = _inline_problem(self.model_dump(), "inline")
        if problem:
            raise ValueError(problem)
        empty = [c for c in "BCD" if not getattr(self, c).strip()]
        if empty:
            raise ValueError(f"inline.{empty[0]}: instruction text for condition {empty[0]} is empty")
        return self


class InstructionSource(_Strict):
    """Where the A-D texts come from: none of the three = the packaged texts."""

    dir: Line | None = Field(default=None, description="a directory with A.md..D.md (spec files only)")
    name: str | None = Field(default=None, pattern=CATALOGUE_NAME,
                             description="an entry of the server's catalogue: AFP_CATALOGUE_DIR/instructions/<name>/")
    inline: InlineInstructions | None = None
    version: str | None = Field(default=None, pattern=r"^[!-~][ -~]{0,99}$",
                                description="the version of inline texts (a directory's is in its manifest.yaml)")

    @model_validator(mode="after")
    def _one_kind(self) -> InstructionSource:
        _one_source(self, ("dir", "name", "inline"))
        if self.version is not None and self.inline is None:
            raise ValueError("version goes with inline texts only (a directory's version is in its manifest.yaml)")
        return self


class JudgePromptSource(_Strict):
    """A judge prompt as text (`inline`) or by name from the server's catalogue (judge_prompts/<name>.md)."""

    name: str | None = Field(default=None, pattern=CATALOGUE_NAME)
    inline: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _exactly_one(self) -> JudgePromptSource:
        if (self.name is None) == (self.inline is None):
            raise ValueError("give exactly one of name, inline")
        problem = _inline_problem(self.inline, "inline") if self.inline is not None else None
        if problem:
            raise ValueError(problem)
        if self.inline is not None and not self.inline.strip():
            raise ValueError("inline: judge prompt is empty")
        return self


def catalogue_root() -> Path | None:
    """The operator's catalogue directory, resolved; None when AFP_CATALOGUE_DIR is unset."""
    configured = get_settings().catalogue_dir
    if not configured:
        return None
    root = Path(configured).resolve()
    if not root.is_dir():
        # No path in the message: it may reach an API client.
        raise SettingError(f"{CATALOGUE_SETTING} on this server is not a directory")
    return root


def catalogue_entry(field: str, name: str) -> Path:
    """The catalogue entry `name` for spec field `field` (fixtures, instructions, judge_prompt).

    Raises the error of the input that cannot be read (FixtureError, ReferenceFileError), as a missing
    file would: a resume then reports that sealed inputs can no longer be read."""
    error = FixtureError if field == "fixtures" else ReferenceFileError
    root = catalogue_root()
    if root is None:
        raise error(f"{field}.name: this server has no catalogue (its operator sets {CATALOGUE_SETTING})")
    sub, suffix = CATALOGUE_LAYOUT[field]
    entry = (root / sub / f"{name}{suffix}").resolve()
    exists = entry.is_file() if suffix else entry.is_dir()
    if not entry.is_relative_to(root) or not exists:
        listed = ", ".join(_entries(root / sub, suffix)[:20]) or "none"
        raise error(f"{field}.name: no catalogue entry {name!r}; known: {listed}")
    return entry


def _entries(shelf: Path, suffix: str) -> list[str]:
    if not shelf.is_dir():
        return []
    if suffix:
        return sorted(p.name.removesuffix(suffix) for p in shelf.iterdir() if p.is_file() and p.name.endswith(suffix))
    return sorted(p.name for p in shelf.iterdir() if p.is_dir())


def resolve_spec_paths(spec: Any, spec_file: Path, source: str) -> Any:
    """The spec (a SweepSpec) with its paths made absolute against the spec file's directory.

    With AFP_CATALOGUE_DIR set, a path that resolves (symbolic links followed) outside the spec file's
    directory and the catalogue is refused, naming the field. The absolute paths are what is stored
    and sealed, so `verify` and `resume` read the same files from any working directory."""
    base = spec_file.resolve().parent
    catalogue = catalogue_root()
    roots = [base, catalogue] if catalogue is not None else None

    def absolute(value: str, field: str) -> str:
        full = (base / value).resolve()
        if roots is not None and not any(full.is_relative_to(r) for r in roots):
            raise SpecError(
                f"{source}: {field}: {value} resolves outside the allowed roots (the spec file's directory "
                f"and {CATALOGUE_SETTING})"
            )
        return str(full)

    update: dict[str, Any] = {}
    if spec.fixtures.dir is not None:
        update["fixtures"] = spec.fixtures.model_copy(update={"dir": absolute(spec.fixtures.dir, "fixtures.dir")})
    if spec.instructions.dir is not None:
        update["instructions"] = spec.instructions.model_copy(
            update={"dir": absolute(spec.instructions.dir, "instructions.dir")})
    if isinstance(spec.judge_prompt, str):
        update["judge_prompt"] = absolute(spec.judge_prompt, "judge_prompt")
    return spec.model_copy(update=update) if update else spec
