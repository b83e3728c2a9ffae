"""Structured output: which mechanism an endpoint gets, and a JSON Schema in each provider's dialect.

A caller (the judges, workers/grading/judges.py) puts a ResponseSchema on the ChatRequest; each
adapter's `build` maps it:
- OpenAI Chat Completions and compatible servers (llama.cpp, vLLM, Ollama, the simulator):
  `response_format: {"type": "json_schema", "json_schema": {"name", "strict": true, "schema"}}`;
- Anthropic: a forced tool, `tool_choice: {"type": "tool", "name": <schema name>}`, with the schema as
  the tool's `input_schema`; the answer is that tool_use block's input;
- Gemini: `generationConfig.responseMimeType: application/json` and `responseSchema` (Gemini's OpenAPI
  subset, converted by `gemini_schema`).

The mode comes from the model's `structured_output` param when it gives one (false: prompt only;
true: the provider's default, or "strict_subset" where that default is off; or a mode name), else from
the provider's row of the table (families.py), which the adapter passes in. Modes:
- "json_schema": the schema as given, length caps included (llama.cpp and vLLM enforce them);
- "strict_subset": length keywords moved into descriptions, since OpenAI's strict mode refuses them;
- "off": nothing is sent; the prompt's own format contract is all there is.
The param is the harness's: it is never sent to the provider. Whatever the mode, the caller's parse of
the answer stays strict: structured output narrows what a model can send, it never replaces the check.
"""

from __future__ import annotations

from typing import Any

from afpbench.workers.errors import SpecError
from afpbench.workers.providers.types import Endpoint

STRUCTURED_OUTPUT_PARAM = "structured_output"
MODES = ("json_schema", "strict_subset", "off")
HARNESS_PARAMS = frozenset({STRUCTURED_OUTPUT_PARAM})  # read by afpbench, never put in a request body
_LENGTHS = {"minLength": "at least {} characters", "maxLength": "at most {} characters"}
_GEMINI_KEYS = ("description", "minimum", "maximum", "minItems", "maxItems", "minLength", "maxLength", "pattern")


def param_problem(value: Any) -> str | None:
    """Why a `structured_output` param value is not accepted (None: it is)."""
    if isinstance(value, bool) or value in MODES:
        return None
    return f"{STRUCTURED_OUTPUT_PARAM} must be true, false or one of {', '.join(MODES)}; got {value!r}"


def structured_mode(endpoint: Endpoint, default: str) -> str:
    """The structured-output mode for calls to this endpoint, `default` its provider's (module docstring)."""
    if STRUCTURED_OUTPUT_PARAM not in endpoint.params:
        return default
    value = endpoint.params[STRUCTURED_OUTPUT_PARAM]
    problem = param_problem(value)
    if problem:
        raise SpecError(f"model {endpoint.provider}/{endpoint.model}: params.{problem}")
    if value is True:
        return default if default != "off" else "strict_subset"
    return "off" if value is False else str(value)


def sent_params(params: dict[str, Any]) -> dict[str, Any]:
    """The endpoint params that go into a request body: all but the harness's own."""
    return {k: v for k, v in params.items() if k not in HARNESS_PARAMS}


def schema_for(mode: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The schema for a mode: as given, or with length keywords moved into descriptions."""
    return schema if mode == "json_schema" else _without_lengths(schema)


def _without_lengths(node: Any) -> Any:
    """Walks the schema's structure (properties, items, anyOf), so a field that happens to be called
    "maxLength" is left alone."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    notes: list[str] = []
    for key, value in node.items():
        if key in _LENGTHS:
            notes.append(_LENGTHS[key].format(value))
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: _without_lengths(sub) for name, sub in value.items()}
        elif key in ("anyOf", "oneOf", "allOf") and isinstance(value, list):
            out[key] = [_without_lengths(sub) for sub in value]
        else:
            out[key] = _without_lengths(value) if key == "items" else value
    if notes:
        out["description"] = "; ".join([node["description"], *notes] if node.get("description") else notes)
    return out


def gemini_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON Schema (objects, arrays, strings, integers, booleans, type lists with null) in Gemini's
    Schema dialect: upper-case types, `nullable` instead of a null type, integer enums as a range,
    `propertyOrdering` (Gemini otherwise orders keys alphabetically), int64 lengths as strings, and
    no `additionalProperties` (Gemini's responseSchema has none; the parse rejects extra keys)."""
    types = schema.get("type")
    types = [types] if isinstance(types, str) else list(types or [])
    concrete = [t for t in types if t != "null"]
    out: dict[str, Any] = {}
    if concrete:
        out["type"] = concrete[0].upper()
    if "null" in types:
        out["nullable"] = True
    for key in _GEMINI_KEYS:
        if key in schema:
            value = schema[key]
            out[key] = str(value) if key in ("minLength", "maxLength", "minItems", "maxItems") else value
    enum = schema.get("enum")
    if enum and all(isinstance(v, int) and not isinstance(v, bool) for v in enum):
        out["minimum"], out["maximum"] = min(enum), max(enum)
    elif enum:
        out["enum"] = [str(v) for v in enum]
        out["format"] = "enum"
    if "properties" in schema:
        out["properties"] = {k: gemini_schema(v) for k, v in schema["properties"].items()}
        out["propertyOrdering"] = list(schema["properties"])
        if "required" in schema:
            out["required"] = list(schema["required"])
    if "items" in schema:
        out["items"] = gemini_schema(schema["items"])
    return out
