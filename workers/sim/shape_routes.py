"""The simulator's routes besides OpenAI chat completions: the batch APIs of the three shapes
(batches.py, batch_views.py), Anthropic's Messages and Gemini's generateContent on the sync lane
(shapes.py, text only), and a model's own page (GET /v1/models/{id}: the preflight of the Anthropic and
Gemini families names the model). `route` answers (status, JSON body or bytes), or None: not ours.
"""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qsl, urlsplit

from afpbench.workers.sim.batch_views import anthropic_results, anthropic_view, batch_list, gemini_view, openai_view
from afpbench.workers.sim.batches import BatchBook, multipart_fields, request_seed
from afpbench.workers.sim.engine import SimEngine
from afpbench.workers.sim.shapes import anthropic_messages, anthropic_reply, gemini_messages, gemini_reply
from afpbench.workers.sim.wire import error_body, served_model

Answer = tuple[int, dict | bytes]
_GEMINI = re.compile(r"^/v1(?:beta)?/models/([^/:]+):(generateContent|batchGenerateContent)$")
_NOT_FOUND: Answer = (404, error_body("no such batch, file or route", "invalid_request_error", "not_found"))


def _json(raw: bytes) -> dict | None:
    try:
        body = json.loads(raw or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return body if isinstance(body, dict) else None


def route_get(book: BatchBook, target: str, root: str) -> Answer | None:
    """`target`: the request's path and query."""
    split = urlsplit(target)
    path, query = split.path.rstrip("/"), dict(parse_qsl(split.query))
    if path == "/v1/messages/batches":
        return 200, batch_list(book, "anthropic", query, root)
    if path == "/v1/batches":  # both shapes list here: Gemini's pages by pageSize/pageToken, OpenAI's by limit/after
        gemini = "pageSize" in query or "pageToken" in query
        return 200, batch_list(book, "gemini" if gemini else "openai", query, root)
    if path.startswith("/v1/models/"):
        name = path.removeprefix("/v1/models/")
        return 200, {"id": name, "type": "model", "name": f"models/{name}", "display_name": served_model(name),
                     "simulated": True}
    if path.startswith("/v1/messages/batches/"):
        rest = path.removeprefix("/v1/messages/batches/")
        batch = book.get(rest.removesuffix("/results"))
        if batch is None or batch.shape != "anthropic":
            return _NOT_FOUND
        return (200, anthropic_results(batch)) if rest.endswith("/results") else (200, anthropic_view(batch, root))
    if path.startswith("/v1/batches/"):
        batch = book.get(path.removeprefix("/v1/"))  # Gemini's names are "batches/…"
        if batch is not None and batch.shape == "gemini":
            return 200, gemini_view(batch)
        batch = book.get(path.removeprefix("/v1/batches/"))
        return (200, openai_view(book, batch)) if batch is not None and batch.shape == "openai" else _NOT_FOUND
    if path.startswith("/v1/files/") and path.endswith("/content"):
        content = book.content(path.removeprefix("/v1/files/").removesuffix("/content"))
        return _NOT_FOUND if content is None else (200, content)
    return None


def route_post(book: BatchBook, engine: SimEngine, path: str, content_type: str, raw: bytes,
               cell: str | None) -> Answer | None:
    if path == "/v1/files":
        fields = multipart_fields(content_type, raw)
        if "file" not in fields:
            return 400, error_body("multipart field 'file' is required", "invalid_request_error")
        return 200, book.upload(fields["file"], fields.get("purpose", b"").decode())
    body = _json(raw)
    if path in ("/v1/batches", "/v1/messages/batches", "/v1/messages") or _GEMINI.match(path):
        if body is None:
            return 400, error_body("body must be a JSON object", "invalid_request_error")
    else:
        return None
    if path == "/v1/batches":
        entries = book.openai_entries(str(body.get("input_file_id")))
        if entries is None:
            return _NOT_FOUND
        batch = book.add("openai", entries, "batch_sim_", endpoint=body.get("endpoint"),
                         input_file_id=body.get("input_file_id"), metadata=body.get("metadata"))
        return 200, openai_view(book, batch)
    if path == "/v1/messages/batches":
        return 200, anthropic_view(book.add("anthropic", book.anthropic_entries(body), "msgbatch_sim_"), "")
    if path == "/v1/messages":
        reply = engine.respond(anthropic_messages(body), None, cell, request_seed(body))
        return 200, anthropic_reply(reply, served_model(body.get("model")))
    matched = _GEMINI.match(path)
    assert matched is not None
    model, verb = matched.group(1), matched.group(2)
    if verb == "generateContent":
        reply = engine.respond(gemini_messages(body), None, cell, request_seed(body))
        return 200, gemini_reply(reply, served_model(model))
    display = str((body.get("batch") or {}).get("display_name") or "")
    return 200, gemini_view(book.add("gemini", book.gemini_entries(model, body), "batches/sim", display_name=display))
