"""afpbench-sim: a simulated OpenAI-compatible model server for runs without a real provider.

Every answer it gives is labelled simulated (served model "sim-<model>", system_fingerprint
"afpbench-sim", header X-Afpbench-Simulated: 1). Canned answers per fixture carry gold grades, so a
simulated sweep has known right answers; provider faults (rate limits, 5xx, timeouts, content
filtering, malformed bodies) are injected deterministically for reliability tests.

The server is workers/sim/server.py; this package file imports nothing, so that a command which only asks
whether it needs a simulator (workers/sim/local.py) does not load the server, its engine and canned answers.
"""
