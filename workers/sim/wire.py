"""The OpenAI Chat Completions bodies the simulator sends, each labelled simulated.

Shapes follow what OpenAI (and Azure, for the content filter) really send, so provider adapters and
outcome classification are tested against the same fields: tool-call arguments as a JSON string,
finish_reason "tool_calls" / "content_filter", an `error` envelope with type and code.
"""

from __future__ import annotations

import time
import uuid

from afpbench.workers.sim.engine import Reply

FINGERPRINT = "afpbench-sim"


def served_model(requested: object) -> str:
    name = str(requested) if requested else "model"
    return name if name.startswith("sim-") else f"sim-{name}"


def completion_body(reply: Reply, model: str, filtered: bool = False) -> dict:
    message: dict = {"role": "assistant", "content": None if filtered else reply.content}
    if reply.tool_call is not None and not filtered:
        call = reply.tool_call
        message["tool_calls"] = [
            {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
        ]
    choice: dict = {
        "index": 0,
        "message": message,
        "logprobs": None,
        "finish_reason": "content_filter" if filtered else reply.finish_reason,
    }
    completion = 0 if filtered else reply.completion_tokens
    if filtered:  # Azure-style output filter: a 200 whose answer was withheld
        choice["content_filter_results"] = {
            "hate": {"filtered": False, "severity": "safe"},
            "self_harm": {"filtered": False, "severity": "safe"},
            "sexual": {"filtered": False, "severity": "safe"},
            "violence": {"filtered": True, "severity": "medium"},
        }
    return {
        "id": f"chatcmpl-sim-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": FINGERPRINT,
        "choices": [choice],
        "usage": {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": reply.prompt_tokens + completion,
        },
    }


def error_body(message: str, type_: str, code: str | None = None) -> dict:
    return {
        "error": {
            "message": f"afpbench-sim (simulated): {message}",
            "type": type_,
            "param": None,
            "code": code,
        }
    }
