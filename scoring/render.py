"""Turn (condition, fixture) into provider-neutral chat messages.

Only the system instruction differs between conditions A-D; the user message (task and evidence)
is built from the fixture alone, so it is byte-identical for every condition. Condition A has no
instruction, so it gets no system message at all. Fixture text is data: it is inserted verbatim,
never interpreted as a template.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from afpbench.fixtures.schema import EvidenceItem, Fixture

CALCULATOR_TOOL = {
    "name": "calculator",
    "description": (
        "Evaluate an arithmetic expression exactly (decimal arithmetic). "
        "Supports + - * / ** ( ) and decimal numbers."
    ),
    "parameters": {
        "type": "object",
        "properties": {"expression": {"type": "string", "description": "e.g. (1200.50 + 300) * 0.15"}},
        "required": ["expression"],
    },
}


@dataclass(frozen=True)
class RenderedPrompt:
    condition: str
    system: str | None
    user: str
    tools: list[dict] = field(default_factory=list)

    def messages(self) -> list[dict]:
        msgs: list[dict] = []
        if self.system:
            msgs.append({"role": "system", "content": self.system})
        msgs.append({"role": "user", "content": self.user})
        return msgs

    def visible_text(self) -> str:
        """Everything the model sees (for the validity gate's visibility check)."""
        parts = [self.system or "", self.user]
        parts += [t["description"] for t in self.tools]
        return "\n".join(parts)


def _evidence_block(item: EvidenceItem) -> str:
    meta = [f"source: {item.source}"]
    if item.authority_rank is not None:
        meta.append(f"authority rank: {item.authority_rank} (1 = highest)")
    if item.date is not None:
        meta.append(f"date: {item.date.isoformat()}")
    if item.external:
        meta.append("retrieved external content")
    header = f"[{item.id}] " + "; ".join(meta)
    return f"{header}\n{item.text.rstrip()}"


def render_user_message(fixture: Fixture) -> str:
    blocks = "\n\n".join(_evidence_block(e) for e in fixture.evidence)
    return f"{fixture.task.rstrip()}\n\n--- Evidence ---\n\n{blocks}\n"


def tools_for(fixture: Fixture) -> list[dict]:
    """Numeric fixtures offer the same calculator in every condition; others offer no tools."""
    return [CALCULATOR_TOOL] if fixture.numeric is not None else []


def render(condition: str, fixture: Fixture, instruction_text: str) -> RenderedPrompt:
    system = instruction_text if instruction_text.strip() else None
    return RenderedPrompt(
        condition=condition,
        system=system,
        user=render_user_message(fixture),
        tools=tools_for(fixture),
    )
