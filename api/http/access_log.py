"""uvicorn's access log without query strings.

A query string is the client's to fill: a token pasted into `?token=` (refused by the door, but the
refusal is still logged) or any other value would otherwise be written to the log as sent. The access
line keeps client, method, path and status.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

ACCESS_LOGGER = "uvicorn.access"


class DropQueryString(logging.Filter):
    """Rewrites uvicorn's access record `(client, method, path?query, http_version, status)`."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str):
            record.args = (args[0], args[1], args[2].split("?", 1)[0], args[3], args[4])
        return True


def uvicorn_log_config() -> dict[str, Any]:
    """uvicorn's own logging configuration, with the filter on its access logger."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["drop_query_string"] = {"()": DropQueryString}
    config["loggers"][ACCESS_LOGGER]["filters"] = ["drop_query_string"]
    return config
