"""The Inspect AI side of benchmarks/bench_throughput.py: the same prompts afpbench sends (condition A,
rendered by scoring/render.py into a JSON-lines file named by AFP_BENCH_PROMPTS), one generate() each,
a trivial scorer. Runs in benchmarks/.inspect-venv (benchmarks/requirements.txt), never in the project's venv:

    AFP_BENCH_PROMPTS=/tmp/prompts.jsonl OPENAI_BASE_URL=http://127.0.0.1:PORT/v1 OPENAI_API_KEY=dummy \
      benchmarks/.inspect-venv/bin/inspect eval benchmarks/inspect_task.py --model openai/sim-plain \
      -M responses_api=false --max-connections 50 --display none

The model is afpbench's simulator in plain mode: every answer is SIMULATED.
"""

from __future__ import annotations

import json
import os

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageSystem, ChatMessageUser
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, scorer
from inspect_ai.solver import TaskState, generate


def _messages(raw: list[dict]):
    return [ChatMessageSystem(content=m["content"]) if m["role"] == "system" else ChatMessageUser(content=m["content"])
            for m in raw]


def load_samples(path: str) -> list[Sample]:
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [Sample(id=row["id"], input=_messages(row["messages"]), target="") for row in rows]


@scorer(metrics=[accuracy()])
def answered():
    """Trivial: correct when the model returned any text (the comparison is about harness overhead)."""

    async def score(state: TaskState, target: Target) -> Score:
        text = state.output.completion if state.output else ""
        return Score(value=CORRECT if text else INCORRECT, answer=text[:200])

    return score


@task
def afp_prompts() -> Task:
    return Task(dataset=MemoryDataset(load_samples(os.environ["AFP_BENCH_PROMPTS"])), solver=[generate()],
                scorer=answered())
