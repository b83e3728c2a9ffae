"""A tool call written as text: the model answered a `tools` request with the call's JSON in its text
instead of the serving layer's tool-call record.

Small open models served by llama.cpp do this (bare JSON, a ```json fence, or Qwen's <tool_call> tags
the server did not parse), and the server then returns the call as plain `content`. It is the model's
real behaviour and is scored as the text it is: afpbench never runs it or turns it into a tool call
(no calculator result exists for it, so it gives the provenance ladder no grounded return value). It
is only named: in the result details, the run record, the report and the verdict's rationale.

A written call is a JSON object with a tool name and its arguments, in the shapes chat templates use:
{"name": ..., "arguments" | "parameters" | "args": ...}, or an OpenAI-style {"function": {...}} /
{"type": "function", "function": {...}}; a JSON list of such objects counts call by call. Prose that
merely mentions a tool is not a call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

_ARGUMENT_KEYS = ("arguments", "parameters", "args")
# What may surround written calls in an answer that is nothing but calls.
_WRAPPING = re.compile(r"```[a-zA-Z]*|```|</?tool_call>|\s+")
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class WrittenToolCall:
    name: str
    arguments: Any  # as written: an object, a string, or whatever the model put there
    offered: bool  # the name is one of the tools the request offered (else an invented tool)
    written: str  # the JSON text as it stands in the answer

    def as_record(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": self.arguments, "offered": self.offered, "written": self.written}


@dataclass(frozen=True)
class WrittenToolCalls:
    """Every tool call written in one answer, and whether the answer is nothing else."""

    calls: tuple[WrittenToolCall, ...]
    whole_answer: bool  # the answer is only the call(s) (with fences / tags / whitespace): no prose

    def as_record(self) -> dict[str, Any]:
        return {"calls": [c.as_record() for c in self.calls], "whole_answer": self.whole_answer}

    @classmethod
    def from_record(cls, record: Any) -> WrittenToolCalls | None:
        """Back from `as_record()` as stored in a result's details (None: no call, or not such a record)."""
        if not isinstance(record, dict) or not isinstance(record.get("calls"), list):
            return None
        calls = tuple(WrittenToolCall(str(c.get("name")), c.get("arguments"), bool(c.get("offered")),
                                      str(c.get("written", ""))) for c in record["calls"] if isinstance(c, dict))
        return cls(calls, bool(record.get("whole_answer"))) if calls else None

    def describe(self) -> str:
        """One line for the verdict's rationale, the report, `show` and the viewer."""
        names = ", ".join(c.name if c.offered else f"{c.name} (not an offered tool)" for c in self.calls)
        where = "the whole answer is" if self.whole_answer else "the answer contains"
        return (
            f"{where} a tool call written as text ({names}): not executed by the serving layer, "
            "scored as the text it is"
        )


def _call_of(value: Any) -> tuple[str, Any] | None:
    if not isinstance(value, dict):
        return None
    inner = value.get("function")
    if isinstance(inner, dict) and isinstance(inner.get("name"), str):
        value = inner
    name = value.get("name")
    if not isinstance(name, str) or not name.strip():
        return None
    argument_key = next((k for k in _ARGUMENT_KEYS if k in value), None)
    if argument_key is None:
        return None
    return name.strip(), value[argument_key]


def _calls_in(value: Any) -> list[tuple[str, Any]] | None:
    """The calls one decoded JSON value holds, or None when it is not (only) tool calls."""
    items = value if isinstance(value, list) and value else [value]
    calls = [_call_of(item) for item in items]
    if any(c is None for c in calls):
        return None
    return [c for c in calls if c is not None]


def written_tool_calls(text: str | None, offered: Sequence[str]) -> WrittenToolCalls | None:
    """The tool calls written in `text` (None: there are none). `offered` are the tool names the
    request offered; a call naming another tool is still a written call, marked not offered."""
    if not text:
        return None
    found: list[WrittenToolCall] = []
    rest: list[str] = []  # the text around the calls
    position = last_end = 0
    while True:
        start = min((i for i in (text.find("{", position), text.find("[", position)) if i >= 0), default=-1)
        if start < 0:
            break
        try:
            value, end = _DECODER.raw_decode(text, start)
        except ValueError:
            position = start + 1
            continue
        calls = _calls_in(value)
        if calls is None:
            position = start + 1
            continue
        written = text[start:end]
        found.extend(WrittenToolCall(name, args, name in offered, written) for name, args in calls)
        rest.append(text[last_end:start])
        position = last_end = end
    if not found:
        return None
    rest.append(text[last_end:])
    return WrittenToolCalls(tuple(found), whole_answer=not _WRAPPING.sub("", "".join(rest)))
