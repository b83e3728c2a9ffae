"""The local simulator that `run`, `serve`, `calibrate` and `rescore` start (workers/sim/local.py)."""

from __future__ import annotations

import json
import socket
import urllib.request
from contextlib import ExitStack

import pytest

from afpbench.workers.errors import SettingsError
from afpbench.workers.settings import Settings
from afpbench.workers.sim.local import start_local_sim


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_sim_url_without_a_host_is_refused_in_one_line() -> None:
    """Rule: bad input gives a one-line error naming the setting, its value and what is wrong."""
    settings = Settings(broker_url="redis://127.0.0.1:6379/0", sim_url="localhost:8765/v1")
    with ExitStack() as stack, pytest.raises(SettingsError) as caught:
        start_local_sim(stack, settings)
    message = str(caught.value)
    assert "\n" not in message
    assert "AFP_SIM_URL" in message and "'localhost:8765/v1'" in message and "no host" in message


def test_distributed_mode_serves_the_sim_at_the_configured_url() -> None:
    """Rule: in distributed mode the sim listens at AFP_SIM_URL (host and port taken from it)."""
    url = f"http://127.0.0.1:{_free_port()}/v1"
    settings = Settings(broker_url="redis://127.0.0.1:6379/0", sim_url=url)
    with ExitStack() as stack:
        assert start_local_sim(stack, settings) == url
        with urllib.request.urlopen(f"{url}/models", timeout=5) as response:
            listing = json.load(response)
    assert listing["data"], listing
