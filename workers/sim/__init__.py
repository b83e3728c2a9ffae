"""afpbench-sim: a simulated OpenAI-compatible model server for runs without a real provider.

Every answer it gives is labelled simulated (served model "sim-<model>", system_fingerprint
"afpbench-sim", header X-Afpbench-Simulated: 1). Canned answers per fixture carry gold grades, so a
simulated sweep has known right answers; provider faults (rate limits, 5xx, timeouts, content
filtering, malformed bodies) are injected deterministically for reliability tests.
"""

from afpbench.workers.sim.faults import FaultConfig
from afpbench.workers.sim.server import SimConfig, SimServer, build_engine, serve_forever

__all__ = ["FaultConfig", "SimConfig", "SimServer", "build_engine", "serve_forever"]
