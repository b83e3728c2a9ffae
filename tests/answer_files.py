"""Answers written for the scoring tests (tests/data/varied_answers, tests/data/sharp_edges): one file
each, a YAML header between `---` lines, then the answer text exactly as scored. All texts SIMULATED."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from afpbench.fixtures.loader import load_fixtures
from afpbench.scoring.answer_check import AnswerCheck, check_answer

FIXTURES = {fx.id: fx for fx in load_fixtures()}


@dataclass(frozen=True)
class Answer:
    path: Path
    meta: dict[str, Any]
    text: str

    @property
    def name(self) -> str:
        return f"{self.meta['fixture']}/{self.path.name}"

    def check(self) -> AnswerCheck:
        """The deterministic layer on the answer, with the calculator calls its header lists."""
        return check_answer(FIXTURES[self.meta["fixture"]], self.text, self.meta.get("tool_calls") or [])


def load_answers(folder: Path) -> list[Answer]:
    """Every answer file of `folder`/P0*/, in name order."""
    answers = []
    for path in sorted(folder.glob("P0*/*.md")):
        _, head, body = path.read_text(encoding="utf-8").split("---\n", 2)
        answers.append(Answer(path, yaml.safe_load(head), body))
    return answers
