"""The simulated OpenAI-compatible model server (stdlib HTTP, one daemon thread per connection).

Endpoints: POST /v1/chat/completions, GET /v1/models, GET /_sim/stats, POST /_sim/reset, and the batch
APIs of the OpenAI, Anthropic and Gemini shapes with their batch lists (batches.py, shape_routes.py).
Everything it answers is labelled simulated: the served model is "sim-<requested model>", the body's
system_fingerprint is "afpbench-sim" and every response has the header X-Afpbench-Simulated: 1.
The order for a chat request: rate limit (429 costs no token) -> latency -> injected fault or answer
(handler.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from afpbench.fixtures.loader import load_fixtures
from afpbench.reference.loader import ReferenceFileError, load_instructions, load_judge_prompt
from afpbench.workers.sim.batches import BatchBook
from afpbench.workers.sim.canned import load_canned
from afpbench.workers.sim.engine import SimEngine
from afpbench.workers.sim.faults import FaultConfig, FaultInjector
from afpbench.workers.sim.handler import ServerState, SimHandler, SimHTTPServer

log = logging.getLogger("afpbench.sim")


@dataclass
class SimConfig:
    faults: FaultConfig = field(default_factory=FaultConfig)
    plain: bool = False  # answer every prompt with one short fixed text (throughput runs)
    fixtures_dir: str | None = None  # None: the packaged pilot set and its simulated/ answers
    instructions_dir: str | None = None  # None: packaged A-D texts (used only to recognise the condition)
    judge_prompt_path: str | None = None  # None: the packaged judge prompt


def build_engine(config: SimConfig) -> SimEngine:
    """Load what the engine compares requests with. Missing packaged instructions or judge prompt only
    weaken recognition (logged); a broken fixture or canned file is an error naming the file."""
    tasks: dict[str, str] = {}
    canned = {}
    if not config.plain:
        fixtures = load_fixtures(config.fixtures_dir)
        tasks = {fx.id: fx.task for fx in fixtures}
        canned = load_canned(config.fixtures_dir, {fx.id: fx.fatal_ids() for fx in fixtures})
    try:
        instruction_set = load_instructions(config.instructions_dir)
        instructions = {c: instruction_set.text(c) for c in instruction_set.by_condition}
    except (OSError, ReferenceFileError) as exc:
        if config.instructions_dir is not None:
            raise
        log.warning("sim: packaged instructions unavailable (%s); every system text counts as B-like", exc)
        instructions = {}
    try:
        judge_prompt = load_judge_prompt(config.judge_prompt_path)
    except (OSError, ReferenceFileError) as exc:
        if config.judge_prompt_path is not None:
            raise
        log.warning("sim: packaged judge prompt unavailable (%s); judge requests will not be recognised", exc)
        judge_prompt = None
    return SimEngine(tasks, canned, instructions, judge_prompt, plain=config.plain)


class SimServer:
    """The simulator on a background thread; a context manager. port=0 picks a free port."""

    def __init__(
        self,
        config: SimConfig,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self._clock = clock  # the rate limiter's clock; tests pass a controllable one
        self.host = host
        self.port = port
        self._httpd: SimHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> SimServer:
        if self._httpd is not None:
            return self
        engine = build_engine(self.config)
        state = ServerState(self.config.faults, engine, FaultInjector(self.config.faults, self._clock),
                            BatchBook(self.config.faults, engine))
        httpd = SimHTTPServer((self.host, self.port), SimHandler)
        httpd.state = state
        self.port = httpd.server_address[1]
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="afpbench-sim", daemon=True
        )
        self._thread.start()
        return self

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def stats(self) -> dict:
        if self._httpd is None:
            raise RuntimeError("the simulator is not running")
        return self._httpd.state.stats.snapshot()

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._httpd.state.stopping.set()  # wakes requests sleeping on latency or an injected timeout
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> SimServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_forever(config: SimConfig, host: str = "127.0.0.1", port: int = 8765) -> None:
    """Run in the foreground until Ctrl-C (for `afpbench sim`)."""
    server = SimServer(config, host, port).start()
    try:
        # The banner inside the try: a client that reads it and presses Ctrl-C at once (the server thread
        # already answers) must not find this thread still before the handler (seen on a loaded machine).
        print(f"afpbench-sim: SIMULATED model server (not a real provider) at {server.base_url}", flush=True)
        while server._thread is not None and server._thread.is_alive():
            server._thread.join(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        print("afpbench-sim: stopped", flush=True)
