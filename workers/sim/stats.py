"""Counters the simulated server keeps for GET /_sim/stats (tests and benchmarks read them)."""

from __future__ import annotations

import json
import threading
import time

from afpbench.workers.sim.engine import Reply


class SimStats:
    """Thread-safe counters behind GET /_sim/stats. by_status counts responses sent; an injected timeout
    is counted under `timeouts` only (its client has normally given up)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data = self._fresh()

    @staticmethod
    def _fresh() -> dict:
        return {
            "requests": 0,
            "by_status": {},
            "served_by_style": {},
            "rate_limited": 0,
            "errors_5xx": 0,
            "timeouts": 0,
            "filtered": 0,
            "malformed": 0,
            "judge_requests": 0,
            "tool_calls": 0,
            "batches": 0,  # batches created through the batch API (batches.py)
            "tokens": {"prompt": 0, "completion": 0, "total": 0},
        }

    def reset(self) -> None:
        with self._lock:
            self._data = self._fresh()

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._data[name] += n

    def status(self, code: int) -> None:
        with self._lock:
            by = self._data["by_status"]
            by[str(code)] = by.get(str(code), 0) + 1
            if code == 200:  # the span of successful answers, for sustained-throughput figures
                now = time.monotonic()
                self._data.setdefault("first_ok_at", now)
                self._data["last_ok_at"] = now

    def tokens(self, prompt: int, completion: int) -> None:
        with self._lock:
            tokens = self._data["tokens"]
            tokens["prompt"] += prompt
            tokens["completion"] += completion
            tokens["total"] += prompt + completion

    def served(self, reply: Reply) -> None:
        self.tokens(reply.prompt_tokens, reply.completion_tokens)
        with self._lock:
            if reply.kind == "judge":
                self._data["judge_requests"] += 1
            elif reply.kind == "tool_call":
                self._data["tool_calls"] += 1
            elif reply.style is not None:
                by = self._data["served_by_style"]
                by[reply.style] = by.get(reply.style, 0) + 1

    def snapshot(self) -> dict:
        with self._lock:
            return json.loads(json.dumps(self._data))


