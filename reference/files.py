"""Reading a user-supplied input file: refused from its size before it is read, and UTF-8 only.

Fixtures, specs, instruction texts and judge prompts all come through here (a 50 MB file would
otherwise take minutes to parse, and a stray byte would be read as whatever the locale guesses).
"""

from __future__ import annotations

from pathlib import Path

from afpbench.reference.errors import AfpbenchError

# A pilot fixture is ~10 KB and an instruction text a few KB; nothing legitimate comes near this.
MAX_INPUT_FILE_BYTES = 5 * 1024 * 1024


class InputFileError(AfpbenchError, ValueError):
    """Why an input file cannot be read or parsed; callers prefix the file name."""


def read_input_text(path: Path, limit: int = MAX_INPUT_FILE_BYTES) -> str:
    """A user-supplied input file as UTF-8 text, refused (without reading it) when over `limit`."""
    try:
        size = path.stat().st_size
        if size > limit:
            raise InputFileError(
                f"file is {size / 1024 / 1024:.1f} MB, over the {limit / 1024 / 1024:g} MB limit for input files"
            )
        raw = path.read_bytes()
    except OSError as exc:  # unreadable (permissions), a directory, gone since it was named...
        raise InputFileError(f"cannot read the file: {exc.strerror or type(exc).__name__}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError(f"not UTF-8 text (invalid byte 0x{raw[exc.start]:02x} at offset {exc.start})") from None


def text_problem(text: str, limit: int = MAX_INPUT_FILE_BYTES) -> str | None:
    """What keeps a text given inline (in a spec, not a file) from being used like a file's text, or None.

    The same limits as a file: at most `limit` bytes of UTF-8 (a lone surrogate is not UTF-8, and
    hashing or storing it would fail later), and no NUL, which no YAML file or PostgreSQL text holds."""
    if "\x00" in text:
        return "contains a NUL character"
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return "contains a lone surrogate (not UTF-8 text)"
    if size > limit:
        return f"is {size / 1024 / 1024:.1f} MB, over the {limit / 1024 / 1024:g} MB limit for input texts"
    return None
