"""Canned responses of the simulated model: one YAML file per fixture, validated on load.

A canned file lists a handful of prepared answers to one fixture, each with a style (how good it is
meant to be), the calculator expressions it "calls" in order, and the gold grading a judge should
give it. The simulated judge answers from that gold, so a sweep against the simulator has known
right answers end to end.

Packaged set: fixtures/pilot/simulated/*.yaml; a user's fixture directory carries its own in
`<fixtures_dir>/simulated/`. A fixture without a canned file gets FALLBACK_TEXT.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from afpbench.fixtures.schema import FatalCriterionId
from afpbench.reference.protocol_facts import DIMENSIONS
from afpbench.reference.validation_errors import describe
from afpbench.workers.errors import CannedFileError

STYLES = ("pass_plain", "pass_afp", "partial", "fatal")
Style = Literal["pass_plain", "pass_afp", "partial", "fatal"]

# Every text the simulator makes up itself says that it is simulated.
FALLBACK_TEXT = (
    "[afpbench-sim] Simulated response: no canned answer exists for this prompt, so this placeholder "
    "stands in for a model answer. It is not the output of any real model."
)
PLAIN_TEXT = "[afpbench-sim] Simulated plain answer for throughput runs; not the output of any real model."


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Gold(_Strict):
    scores: dict[str, int]
    fatal: FatalCriterionId | None = None
    state: Literal["MODEL_PASS", "MODEL_FAIL"]

    @field_validator("scores")
    @classmethod
    def _four_dimensions(cls, v: dict[str, int]) -> dict[str, int]:
        if set(v) != set(DIMENSIONS):
            missing = sorted(set(DIMENSIONS) - set(v))
            extra = sorted(set(v) - set(DIMENSIONS))
            raise ValueError(
                f"scores must name exactly {', '.join(DIMENSIONS)} (missing {missing}, unknown {extra})"
            )
        bad = {k: s for k, s in v.items() if s not in (0, 1, 2)}
        if bad:
            raise ValueError(f"scores must be 0, 1 or 2: {bad}")
        return {d: v[d] for d in DIMENSIONS}

    @model_validator(mode="after")
    def _fatal_means_fail(self) -> Gold:
        # Protocol rule: any fatal criterion makes the result MODEL_FAIL whatever the score.
        if self.fatal is not None and self.state != "MODEL_FAIL":
            raise ValueError(f"a gold fatal ({self.fatal.value}) requires state MODEL_FAIL")
        return self

    @property
    def total(self) -> int:
        return sum(self.scores.values())


class CannedResponse(_Strict):
    id: str = Field(min_length=1, max_length=64)
    style: Style
    text: str = Field(min_length=1)
    tool_calls: list[str] = Field(default_factory=list)
    gold: Gold

    @model_validator(mode="after")
    def _style_matches_gold(self) -> CannedResponse:
        if self.style == "fatal" and self.gold.fatal is None:
            raise ValueError(f"response {self.id}: style 'fatal' needs gold.fatal to name a criterion")
        return self


class CannedFile(_Strict):
    fixture: str = Field(min_length=1)
    responses: list[CannedResponse] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_ids(self) -> CannedFile:
        ids = [r.id for r in self.responses]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"duplicate response id(s): {', '.join(dupes)}")
        return self


def parse_canned(name: str, text: str) -> CannedFile:
    """Parse one canned file; `name` is only used in error messages."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise CannedFileError(f"{name}: not valid YAML{where}") from exc
    if not isinstance(data, dict):
        raise CannedFileError(f"{name}: expected a mapping with 'fixture' and 'responses'")
    try:
        return CannedFile.model_validate(data)
    except ValidationError as exc:
        raise CannedFileError(f"{name}: {describe(exc, CannedFile)}") from exc


def _check_against_fixture(name: str, canned: CannedFile, fatal_ids: dict[str, list[str]]) -> None:
    if canned.fixture not in fatal_ids:
        known = ", ".join(sorted(fatal_ids))
        raise CannedFileError(f"{name}: fixture: {canned.fixture} is not a loaded fixture (known: {known})")
    for i, response in enumerate(canned.responses):
        fatal = response.gold.fatal
        if fatal is not None and fatal.value not in fatal_ids[canned.fixture]:
            raise CannedFileError(
                f"{name}: responses.{i}.gold.fatal: {fatal.value} is not a fatal criterion of "
                f"{canned.fixture} ({', '.join(fatal_ids[canned.fixture])})"
            )


def load_canned(
    fixtures_dir: str | Path | None = None, fatal_ids: dict[str, list[str]] | None = None
) -> dict[str, list[CannedResponse]]:
    """Canned responses by fixture id; a missing `simulated` directory means none (all fallback).

    With `fatal_ids` (fixture id -> its fatal criterion ids) each file is checked against its fixture:
    the fixture must exist and a gold fatal must be one the fixture declares, or the judge could never
    be asked about it."""
    if fixtures_dir is None:
        root = resources.files("afpbench.fixtures").joinpath("pilot").joinpath("simulated")
    else:
        root = Path(fixtures_dir) / "simulated"
    if not root.is_dir():
        return {}
    entries = sorted((p for p in root.iterdir() if p.name.endswith((".yaml", ".yml"))), key=lambda p: p.name)
    by_fixture: dict[str, list[CannedResponse]] = {}
    where: dict[str, str] = {}
    for entry in entries:
        canned = parse_canned(entry.name, entry.read_text(encoding="utf-8"))
        if canned.fixture in by_fixture:
            raise CannedFileError(
                f"{entry.name}: fixture {canned.fixture} already has canned file {where[canned.fixture]}"
            )
        if fatal_ids is not None:
            _check_against_fixture(entry.name, canned, fatal_ids)
        by_fixture[canned.fixture] = list(canned.responses)
        where[canned.fixture] = entry.name
    return by_fixture
