"""The values a sweep spec may hold, beyond their types (counts and numbers that are not booleans:
reference/values.py): one-line names, text a database column and a JSON body keep faithfully, usable base URLs;
and the strict base of the spec's models (sweeps/spec.py, and the limits it declares: limits/base.py).

Each refusal names the field and what is wrong, never the value (it may be a pasted key).
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

Loc = tuple[str | int, ...]
NUL = "\x00"
_SURROGATE = re.compile("[\ud800-\udfff]")


def _one_line(value: str) -> str:
    # Names, ids, URLs and paths end up in one-line error messages, log lines and table cells.
    bad = next((c for c in value if ord(c) < 32 or ord(c) == 127), None)
    if bad is not None:
        raise PydanticCustomError("control_character", "must be one line without control characters "
                                  "(found U+{code} at position {at})",
                                  {"code": f"{ord(bad):04X}", "at": value.index(bad)})
    return value


Line = Annotated[str, AfterValidator(_one_line)]


class StrictModel(BaseModel):
    # No unknown field, and no inf/nan in any typed number, also when written as a string ("inf", ".nan"
    # in YAML, NaN in JSON).
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


def checked_base_url(url: str) -> str:
    """The base URL with its scheme in lower case and no trailing '/'; ValueError unless it is http(s)
    with a host, a valid port and no user name or password."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not url[len(parts.scheme):].startswith("://"):
        raise ValueError(f"base_url {url!r} must start with http:// or https://")
    if parts.username is not None or parts.password is not None:
        # Not echoed: the part before '@' is a credential, and credentials never go into a spec.
        raise ValueError("base_url must not carry a user name or password; name the key in 'api_key_env'")
    try:
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        port_ok = False
    if not port_ok:
        raise ValueError(f"base_url {url!r} has an invalid port")
    if not parts.hostname:
        # 'http://' was kept as 'http:' and every request went nowhere.
        raise ValueError(f"base_url {url!r} has no host")
    return (scheme + url[len(parts.scheme):]).rstrip("/")


def refuse_unstorable(model_name: str, data: Any) -> None:
    """Raise a ValidationError located at the first unstorable value of the raw input (see
    unstorable_at); raised from a model validator, pydantic prefixes the location of enclosing fields."""
    found = unstorable_at(data, ())
    if found:
        loc, kind, message = found
        error = InitErrorDetails(type=PydanticCustomError(kind, message), loc=loc, input=None)
        raise ValidationError.from_exception_data(model_name, [error])


def unstorable_at(data: Any, loc: Loc) -> tuple[Loc, str, str] | None:
    """(where, error type, message) of the first value no database column, JSON body or error line can
    hold faithfully: a NUL character, a lone surrogate, a non-finite number."""
    if isinstance(data, float) and not math.isfinite(data):
        return loc, "finite_number", f"must be a finite number, got {data}"
    if isinstance(data, str):
        return _bad_text(data, loc)
    if isinstance(data, dict):
        items: Any = data.items()
    elif isinstance(data, list):
        items = enumerate(data)
    else:
        return None
    for k, v in items:
        if isinstance(k, str):
            bad_key = _bad_text(k, loc)
            if bad_key:  # the key itself cannot be shown in the location: name its mapping
                return bad_key[0], bad_key[1], f"a key {bad_key[2]}"
        found = unstorable_at(v, (*loc, k))
        if found:
            return found
    return None


def _bad_text(text: str, loc: Loc) -> tuple[Loc, str, str] | None:
    nul = text.find(NUL)
    if nul >= 0:
        return loc, "nul_character", f"contains a NUL character (at position {nul})"
    surrogate = _SURROGATE.search(text)
    if surrogate:
        return loc, "lone_surrogate", (f"contains a lone surrogate U+{ord(surrogate.group()):04X} (at position "
                                       f"{surrogate.start()}), which is not valid Unicode")
    return None
