"""The simulated provider's family (workers/sim/): Chat Completions on the wire, its own execution queue.

Only its preflight differs from the OpenAI-compatible family's: the simulator serves any model name, so
its listing is not searched. Its output is labelled simulated everywhere (the provider row's `simulated`).
"""

from __future__ import annotations

from afpbench.workers.providers.openai_compat import OpenAICompatAdapter
from afpbench.workers.providers.types import Endpoint, ProbeAnswer, ProbeFinding, ProbeKind


class SimulatedAdapter(OpenAICompatAdapter):
    def estimate_tokens(self, text: str) -> int:
        """The simulator's usage report counts whitespace-separated words (workers/sim/engine.py:count_tokens)."""
        return len(text.split())

    def read_probe(self, endpoint: Endpoint, answer: ProbeAnswer) -> ProbeFinding | None:
        return ProbeFinding(ProbeKind.no_listing) if answer.status == 404 else None
