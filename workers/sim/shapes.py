"""Anthropic's Messages and Gemini's GenerateContent as the simulator speaks them (text only, no tool
rounds): a request body read into the engine's chat messages, a Reply written back in the family's
shape, labelled simulated (served model "sim-…", Anthropic's `id` and Gemini's `modelVersion` say so).
Shapes: https://docs.anthropic.com/en/api/messages and https://ai.google.dev/api/generate-content.
"""

from __future__ import annotations

import uuid

from afpbench.workers.sim.engine import Reply, content_text


def anthropic_messages(body: dict) -> list[dict]:
    messages: list[dict] = []
    if body.get("system"):
        messages.append({"role": "system", "content": content_text(body["system"])})
    for m in body.get("messages") or []:
        if isinstance(m, dict):
            messages.append({"role": "assistant" if m.get("role") == "assistant" else "user",
                             "content": content_text(m.get("content"))})
    return messages


def anthropic_reply(reply: Reply, model: str) -> dict:
    return {
        "id": f"msg_sim_{uuid.uuid4().hex[:20]}", "type": "message", "role": "assistant", "model": model,
        "content": [{"type": "text", "text": reply.content or ""}],
        "stop_reason": "max_tokens" if reply.finish_reason == "length" else "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": reply.prompt_tokens, "output_tokens": reply.completion_tokens},
    }


def gemini_messages(body: dict) -> list[dict]:
    messages: list[dict] = []
    instruction = body.get("systemInstruction") or body.get("system_instruction")
    if isinstance(instruction, dict):
        messages.append({"role": "system", "content": content_text(instruction.get("parts"))})
    for c in body.get("contents") or []:
        if isinstance(c, dict):
            messages.append({"role": "assistant" if c.get("role") == "model" else "user",
                             "content": content_text(c.get("parts"))})
    return messages


def gemini_reply(reply: Reply, model: str) -> dict:
    return {
        "candidates": [{"content": {"role": "model", "parts": [{"text": reply.content or ""}]},
                        "finishReason": "MAX_TOKENS" if reply.finish_reason == "length" else "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": reply.prompt_tokens, "candidatesTokenCount": reply.completion_tokens,
                          "totalTokenCount": reply.prompt_tokens + reply.completion_tokens},
        "modelVersion": model,
        "responseId": f"sim-{uuid.uuid4().hex[:16]}",
    }
