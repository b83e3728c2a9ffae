"""Which environment variables a spec may name as a provider key (`api_key_env`).

Only the operator's allow-list, AFP_KEY_VARS: comma-separated names and prefixes ending in `*`
(`OPENAI_API_KEY,AFP_KEY_*`). Unset: the providers' well-known key names plus `AFP_KEY_*`
(DEFAULT_KEY_VARIABLES); set but empty: no variable at all. afpbench's own secrets are never
allowed, whatever the list says. A spec could otherwise send any server variable (a password, HOME,
another model's key) as a bearer token to a base_url of its choosing.

Checked twice: when a spec is validated (an early one-line error) and in `types.key_for`, where the
value is read (so a stored spec, an old sweep or a direct Endpoint cannot get past the list).
"""

from __future__ import annotations

import re

from afpbench.workers.errors import KeyNotAllowed, SettingError
from afpbench.workers.settings import get_settings

SETTING = "AFP_KEY_VARS"
# The key variables a spec may name when AFP_KEY_VARS is unset: the providers' well-known names, plus
# the AFP_KEY_ prefix for anything else an operator provisions (a new family's key works under it).
DEFAULT_KEY_VARIABLES = (
    "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENROUTER_API_KEY",
    "GROQ_API_KEY", "AZURE_OPENAI_API_KEY", "AFP_KEY_*",
)
# afpbench's own secrets: never a provider key, even under a prefix such as AFP_*.
RESERVED_KEY_VARIABLES = frozenset({
    "AFP_API_TOKEN", "AFP_DATABASE_URL", "AFP_BROKER_URL", "AFP_REDIS_URL",
    "AFP_FLOWER_USER", "AFP_FLOWER_PASSWORD",
})
_ENTRY = re.compile(r"^[A-Z_][A-Z0-9_]*\*?$")


def allowed_patterns(setting: str | None) -> tuple[str, ...]:
    """The allow-list entries of an AFP_KEY_VARS value (None: the defaults); raises SettingError."""
    if setting is None:
        return DEFAULT_KEY_VARIABLES
    entries = tuple(e.strip() for e in setting.split(",") if e.strip())
    for entry in entries:
        if not _ENTRY.match(entry):
            raise SettingError(
                f"{SETTING}: entry {entry!r} is not a variable name or a prefix ending in '*' "
                "(upper-case letters, digits and '_')"
            )
        if entry.endswith("*") and len(entry) < 3:
            # A bare '*' or one-letter prefix allows (nearly) every variable: the hole this list closes.
            raise SettingError(f"{SETTING}: entry {entry!r} is too broad; name a prefix of at least 2 characters")
    return entries


def is_allowed(name: str, patterns: tuple[str, ...]) -> bool:
    if name in RESERVED_KEY_VARIABLES:
        return False
    return any(name.startswith(p[:-1]) if p.endswith("*") else name == p for p in patterns)


def reserved_refusal(name: str) -> str | None:
    """Why `name` may never be a key variable (one of afpbench's own secrets), or None. Needs no settings."""
    if name in RESERVED_KEY_VARIABLES:
        return f"{name} is afpbench's own secret and cannot be used as a provider key, whatever {SETTING} allows"
    return None


def refusal(name: str) -> str | None:
    """Why `name` may not be used as a key variable under the current settings, or None if it may."""
    if reserved := reserved_refusal(name):
        return reserved
    patterns = allowed_patterns(get_settings().key_vars)
    if is_allowed(name, patterns):
        return None
    shown = ", ".join(patterns) if patterns else "nothing (it is set but empty)"
    return f"{name} is not an allowed key variable: {SETTING} allows {shown}"


def check_key_variable(name: str) -> None:
    """Raise KeyNotAllowed (a MissingKey: the model stops, as for an unset key) unless `name` is allowed."""
    why = refusal(name)
    if why:
        raise KeyNotAllowed(why)
