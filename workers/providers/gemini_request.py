"""What Gemini is sent, from the neutral request: the conversation as `contents` (tool calls as
functionCall parts, tool results as functionResponse parts, system messages as the systemInstruction)
and a model's params split into top-level fields and generationConfig.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

_TOP_LEVEL = frozenset({"safetySettings", "toolConfig", "cachedContent", "labels"})
# Neutral/OpenAI-style parameter names accepted for convenience, mapped into generationConfig.
_ALIASES = {"max_tokens": "maxOutputTokens", "top_p": "topP", "top_k": "topK", "stop": "stopSequences"}


def _function_response(content: str | None) -> dict:
    try:
        parsed = json.loads(content or "")
    except json.JSONDecodeError:
        parsed = None
    return parsed if isinstance(parsed, dict) else {"result": content or ""}


def to_gemini_contents(messages: list[dict]) -> tuple[dict | None, list[dict]]:
    system = [m.get("content") or "" for m in messages if m["role"] == "system"]
    names: dict[str, str] = {}  # tool_call_id -> function name (functionResponse needs the name)
    contents: list[dict] = []
    for msg in messages:
        role, parts = msg["role"], []
        if role == "system":
            continue
        if role == "tool":
            name = names.get(msg.get("tool_call_id", ""), "")
            parts.append(
                {"functionResponse": {"name": name, "response": _function_response(msg.get("content"))}}
            )
        else:
            if msg.get("content"):
                parts.append({"text": msg["content"]})
            calls = (msg.get("tool_calls") or []) if role == "assistant" else []
            for call in calls:
                names[call["id"]] = call["name"]
                try:
                    args = json.loads(call.get("arguments_raw") or "{}")
                except json.JSONDecodeError:
                    args = {"_raw_arguments": call.get("arguments_raw")}
                part: dict[str, Any] = {"functionCall": {"name": call["name"], "args": args}}
                if call.get("thought_signature"):
                    part["thoughtSignature"] = call["thought_signature"]
                parts.append(part)
        gem_role = "model" if role == "assistant" else "user"
        if contents and contents[-1]["role"] == gem_role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": gem_role, "parts": parts})
    instruction = {"parts": [{"text": "\n\n".join(system)}]} if system else None
    return instruction, contents


def split_params(params: Mapping[str, Any]) -> tuple[dict, dict]:
    top: dict[str, Any] = {}
    gen: dict[str, Any] = dict(params.get("generationConfig") or {})
    for k, v in params.items():
        if k == "generationConfig":
            continue
        if k in _TOP_LEVEL:
            top[k] = v
        else:
            gen[_ALIASES.get(k, k)] = v
    return top, gen
