"""Turn (condition, fixture) into provider-neutral chat messages.

Only the system instruction differs between conditions A-D; the user message (task and evidence)
is built from the fixture alone, so it is byte-identical for every condition. Condition A has no
instruction, so it gets no system message at all. Fixture text is data: it is inserted verbatim,
never interpreted as a template.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from afpbench.fixtures.schema import EvidenceItem, Fixture

# A tool as offered to the model: a provider-neutral JSON document (name, description, JSON Schema
# parameters); the provider adapters wrap it in their own envelope.
ToolSpec = dict[str, Any]
# One chat message: {"role": ..., "content": ...}.
Message = dict[str, str]
# Between the parts of a prompt's visible text (system, user, each tool description).
VISIBLE_JOIN = "\n"

CALCULATOR_TOOL: ToolSpec = {
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
    tools: list[ToolSpec] = field(default_factory=list)

    def messages(self) -> list[Message]:
        msgs: list[Message] = []
        if self.system:
            msgs.append({"role": "system", "content": self.system})
        msgs.append({"role": "user", "content": self.user})
        return msgs

    def visible_parts(self) -> list[str]:
        """What the model sees, message by message: system (empty in condition A), user, tool descriptions."""
        return [self.system or "", self.user, *(t["description"] for t in self.tools)]

    def visible_text(self) -> str:
        """Everything the model sees (for the validity gate's visibility check)."""
        return VISIBLE_JOIN.join(self.visible_parts())


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


def tools_for(fixture: Fixture) -> list[ToolSpec]:
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
