"""The simulator's batch APIs, labelled simulated like everything it serves, in the three shapes the
adapters speak (workers/providers/*_batch.py):
- OpenAI: a JSONL file uploaded (POST /v1/files), a batch over it (POST /v1/batches), read
  (GET /v1/batches/{id}), its output and error files served (GET /v1/files/{id}/content);
- Anthropic: POST /v1/messages/batches, GET /v1/messages/batches/{id}, GET …/{id}/results (JSONL);
- Gemini: POST /v1/models/{model}:batchGenerateContent (inlined requests), GET /v1/batches/{id} (an
  operation whose response carries the inlined responses once done);
and each shape's batch list, newest first, paged as the provider documents it (batch_views.py), where a
client looks for the batch a create request it got no answer to may have made (`batch_create_hold_s`
holds that answer: handler.py).

A batch is in progress for `batch_delay_s` after it was created, then ends at once: every entry answered
by the same engine as a sync request (its cell key from the request body's `metadata.afpbench_cell`, so
a cell gets the same answer on either lane), except the entries drawn to fail (`batch_error_rate`: a 500
error) and, in a batch drawn to expire (`batch_expire_rate`), its second half, left unrun as a real
batch past its window is. Draws are a hash of the seed and the custom id (or the batch's number).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from typing import Literal

from afpbench.workers.sim.engine import Reply, SimEngine
from afpbench.workers.sim.faults import FaultConfig
from afpbench.workers.sim.shapes import anthropic_messages, gemini_messages

WINDOW_S = 24 * 3600
SIM_CELL = "afpbench_cell"
Shape = Literal["openai", "anthropic", "gemini"]
Outcome = tuple[str, Literal["answer", "error", "expired"], Reply | None]  # custom id, what happened, reply


def _uniform(*parts: object) -> float:
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def multipart_fields(content_type: str, body: bytes) -> dict[str, bytes]:
    """The fields of a multipart/form-data body by name (the stdlib's MIME parser)."""
    message = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + body)
    out: dict[str, bytes] = {}
    for part in message.iter_parts():  # type: ignore[attr-defined]  # a multipart EmailMessage
        name = part.get_param("name", header="content-disposition")
        if name:
            payload = part.get_payload(decode=True)
            out[str(name)] = payload if isinstance(payload, bytes) else b""
    return out


@dataclass
class Entry:
    custom_id: str
    messages: list[dict]
    key: str | None  # the cell key, where the harness sent one
    model: str
    seed: int = 0  # the request's `seed` (the sweep's params), as a sync request passes it


def request_seed(body: dict) -> int:
    seed = body.get("seed", 0)
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else 0


def _key(body: dict) -> str | None:
    metadata = body.get("metadata")
    key = metadata.get(SIM_CELL) if isinstance(metadata, dict) else None
    return key if isinstance(key, str) else None


@dataclass
class SimBatch:
    number: int
    id: str
    shape: Shape
    entries: list[Entry]
    created_at: int
    started: float
    extra: dict = field(default_factory=dict)  # the shape's own fields (input file, metadata, display name)
    outcomes: list[Outcome] | None = None  # set when it ends
    expired: bool = False
    ended_at: int | None = None


class BatchBook:
    """The files and batches of one running simulator (shared by its connection threads)."""

    def __init__(self, faults: FaultConfig, engine: SimEngine, clock=time.monotonic) -> None:
        self.faults = faults
        self.engine = engine
        self.clock = clock
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, SimBatch] = {}
        self.lock = threading.Lock()

    def upload(self, content: bytes, purpose: str) -> dict:
        file_id = f"file-sim-{uuid.uuid4().hex[:20]}"
        with self.lock:
            self.files[file_id] = content
        return {"id": file_id, "object": "file", "bytes": len(content), "created_at": int(time.time()),
                "filename": "batch.jsonl", "purpose": purpose, "simulated": True}

    def content(self, file_id: str) -> bytes | None:
        with self.lock:
            return self.files.get(file_id)

    def add(self, shape: Shape, entries: list[Entry], prefix: str, **extra) -> SimBatch:
        with self.lock:
            batch = SimBatch(len(self.batches) + 1, f"{prefix}{uuid.uuid4().hex[:20]}", shape, entries,
                             int(time.time()), self.clock(), extra)
            self.batches[batch.id] = batch
        return batch

    def openai_entries(self, input_file_id: str) -> list[Entry] | None:
        with self.lock:
            content = self.files.get(input_file_id)
        if content is None:
            return None
        lines = [json.loads(line) for line in content.decode("utf-8").splitlines() if line.strip()]
        bodies = [(line, line.get("body") if isinstance(line.get("body"), dict) else {}) for line in lines]
        return [Entry(str(line.get("custom_id")), body.get("messages") or [], _key(body),
                      str(body.get("model") or "model"), request_seed(body)) for line, body in bodies]

    @staticmethod
    def anthropic_entries(body: dict) -> list[Entry]:
        return [Entry(str(r.get("custom_id")), anthropic_messages(r.get("params") or {}), _key(r.get("params") or {}),
                      str((r.get("params") or {}).get("model") or "model"), request_seed(r.get("params") or {}))
                for r in body.get("requests") or [] if isinstance(r, dict)]

    @staticmethod
    def gemini_entries(model: str, body: dict) -> list[Entry]:
        config = ((body.get("batch") or {}).get("input_config") or (body.get("batch") or {}).get("inputConfig") or {})
        requests = (config.get("requests") or {}).get("requests") or []
        return [Entry(str((r.get("metadata") or {}).get("key") or i), gemini_messages(r.get("request") or {}),
                      _key(r.get("request") or {}), model, request_seed(r.get("request") or {}))
                for i, r in enumerate(requests) if isinstance(r, dict)]

    def listed(self, shape: Shape) -> list[SimBatch]:
        """The shape's batches, newest first, each brought up to date as a read of it would be."""
        with self.lock:
            ids = [b.id for b in sorted(self.batches.values(), key=lambda b: -b.number) if b.shape == shape]
        return [b for b in map(self.get, ids) if b is not None]

    def get(self, batch_id: str) -> SimBatch | None:
        with self.lock:
            batch = self.batches.get(batch_id)
            due = batch is not None and self.clock() - batch.started >= self.faults.batch_delay_s
            if batch is not None and batch.outcomes is None and due:
                self._finish(batch)
            return batch

    def _finish(self, batch: SimBatch) -> None:
        batch.expired = _uniform(self.faults.seed, batch.number, "batch-expire") < self.faults.batch_expire_rate
        unrun = len(batch.entries) // 2 if batch.expired else len(batch.entries)
        outcomes: list[Outcome] = []
        for i, entry in enumerate(batch.entries):
            if i >= unrun:
                outcomes.append((entry.custom_id, "expired", None))
            elif _uniform(self.faults.seed, entry.custom_id, "batch-error") < self.faults.batch_error_rate:
                outcomes.append((entry.custom_id, "error", None))
            else:
                outcomes.append((entry.custom_id, "answer",
                                 self.engine.respond(entry.messages, None, entry.key, entry.seed)))
        batch.outcomes = outcomes
        batch.ended_at = int(time.time())
