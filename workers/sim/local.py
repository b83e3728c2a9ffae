"""A simulated-model server started by the command that needs it (`run`, `serve`, `calibrate`,
`rescore`): simulated models and judges without a base_url talk to it. Its output is labelled
simulated everywhere."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from contextlib import ExitStack
from urllib.parse import urlparse

from afpbench.workers.errors import SettingsError
from afpbench.workers.settings import Settings
from afpbench.workers.sweeps.spec import ModelSpec

log = logging.getLogger("afpbench.sim")


def needs_local_sim(models: Iterable[ModelSpec]) -> bool:
    return any(m.simulated and not m.base_url for m in models)


def start_local_sim(stack: ExitStack, settings: Settings) -> str:
    """Start the sim for the life of `stack`; returns its base URL.

    Embedded mode: a private sim on a free port (settings.sim_url points at it). Distributed: a sim at
    AFP_SIM_URL, which workers on this machine reach, unless one already listens there."""
    # Imported here: a run whose models all have a base_url never loads the server (~20 ms of imports).
    from afpbench.workers.sim.faults import FaultConfig
    from afpbench.workers.sim.server import SimConfig, SimServer

    config = SimConfig(faults=FaultConfig())
    if settings.embedded:
        server = stack.enter_context(SimServer(config).start())
        settings.sim_url = server.base_url
        log.info("simulated model server on %s", server.base_url)
        return server.base_url
    parsed = urlparse(settings.sim_url)
    if not parsed.hostname:
        raise SettingsError(f"AFP_SIM_URL {settings.sim_url!r} names no host (expected http://host:port/v1)")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)  # the port the URL implies
    try:
        stack.enter_context(SimServer(config, parsed.hostname, port).start())
    except OSError:
        log.info("using the simulated model server already listening at %s", settings.sim_url)
    return settings.sim_url
