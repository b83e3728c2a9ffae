"""The side-by-side benchmark's model: a minimal OpenAI-compatible Chat Completions server (Starlette on
uvicorn, one asyncio process of its own), so no harness shares its interpreter and the mock is never
the slow part. Every answer is one short fixed text: SIMULATED.

    python benchmarks/mock_openai.py --port 8799 --latency-ms 200

GET /v1/models lists the benchmark's model names; POST /v1/chat/completions waits --latency-ms, then
answers; GET /_mock/stats gives the answers sent and the monotonic-clock seconds from the first answer
to the last (the server-side span every harness is measured by) and the requests in flight at the mock
(peak, time-weighted mean, seconds at each count); POST /_mock/reset clears them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

ANSWER = "SIMULATED benchmark answer: the harness overhead is what is measured."
MODELS = ["sim-plain", *(f"sim-plain-{i}" for i in range(10))]


class Stats:
    """Answers and their span, and the requests in flight at the mock: the peak, the time-weighted mean
    from the first arrival to the last answer, and the seconds spent at each count (one event loop: no
    lock needed)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.answers = 0
        self.first: float | None = None
        self.last: float | None = None
        self.in_flight = 0
        self.peak = 0
        self.arrived: float | None = None
        self.changed: float | None = None
        self.seconds_at: dict[int, float] = {}

    def _count(self, delta: int) -> None:
        now = time.monotonic()
        if self.changed is not None:
            self.seconds_at[self.in_flight] = self.seconds_at.get(self.in_flight, 0.0) + now - self.changed
        self.changed = now
        self.arrived = now if self.arrived is None else self.arrived
        self.in_flight += delta
        self.peak = max(self.peak, self.in_flight)

    def arrival(self) -> None:
        self._count(+1)

    def answered(self) -> None:
        self._count(-1)
        now = time.monotonic()
        self.first = now if self.first is None else self.first
        self.last = now
        self.answers += 1

    def snapshot(self) -> dict:
        span = (self.last - self.first) if self.first is not None and self.last is not None else None
        total = sum(self.seconds_at.values())
        mean = sum(n * s for n, s in self.seconds_at.items()) / total if total else None
        return {"answers": self.answers, "first_to_last_s": span, "peak_in_flight": self.peak,
                "mean_in_flight": mean, "seconds_at_in_flight": {str(n): round(s, 3)
                                                                 for n, s in sorted(self.seconds_at.items())}}


def build(latency_s: float) -> Starlette:
    stats = Stats()

    async def models(_request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": m, "object": "model", "owned_by": "mock"}
                                                        for m in MODELS]})

    async def chat(request: Request) -> Response:
        body = json.loads(await request.body())
        stats.arrival()
        if latency_s:
            await asyncio.sleep(latency_s)
        prompt_tokens = sum(len(str(m.get("content", ""))) for m in body.get("messages", [])) // 4
        stats.answered()
        return JSONResponse({
            "id": f"chatcmpl-mock-{uuid.uuid4().hex[:24]}", "object": "chat.completion",
            "created": int(time.time()), "model": body.get("model", "sim-plain"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": ANSWER}, "logprobs": None,
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 12, "total_tokens": prompt_tokens + 12},
        })

    async def get_stats(_request: Request) -> Response:
        return JSONResponse(stats.snapshot())

    async def reset(_request: Request) -> Response:
        stats.reset()
        return JSONResponse({"reset": True})

    return Starlette(routes=[
        Route("/v1/models", models), Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/_mock/stats", get_stats), Route("/_mock/reset", reset, methods=["POST"]),
    ])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8799)
    ap.add_argument("--latency-ms", type=float, default=0)
    args = ap.parse_args()
    # A backlog above the harnesses' 50 connections; no access log (one line per request is real work).
    uvicorn.run(build(args.latency_ms / 1000), host=args.host, port=args.port, log_level="warning",
                access_log=False, backlog=1024)


if __name__ == "__main__":
    main()
