"""How a pydantic ValidationError reads, the same for every input afpbench validates (a sweep spec, a
fixture file, a simulator's canned responses): each problem as `where: what`, pydantic's "Value error, "
prefix dropped, an unknown field with the nearest known name (or the names known there).

A fixture or canned file's problems stay on one line, `; ` between them (`describe`); a spec's, which may
be many, are counted and listed one per line beneath the file's name (`as_message`, docs/SPEC.md).
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError


def describe(exc: ValidationError, root: type[BaseModel]) -> str:
    """Every problem of `exc`, raised validating `root`, on one line."""
    return "; ".join(problem_lines(exc, root))


def problem_lines(exc: ValidationError, root: type[BaseModel]) -> list[str]:
    """One `where: what` line per error; `root` is the model validated, whose fields an unknown one is
    compared with."""
    return error_lines(exc.errors(), root)


def error_lines(errors: Iterable[Mapping[str, Any]], root: type[BaseModel] | None = None,
                skip: tuple[str, ...] = ()) -> list[str]:
    """One `where: what` line per pydantic error (also FastAPI's request errors, whose location parts in
    `skip`, such as "query" or "body", are left out); with `root`, an unknown field is compared with the
    fields known there."""
    lines = []
    for err in errors:
        loc = tuple(p for p in err.get("loc", ()) if p not in skip)
        where = ".".join(str(p) for p in loc) or "(top level)"
        if root is not None and err.get("type") == "extra_forbidden" and loc:
            msg = _unknown_field(root, loc)
        else:
            msg = error_message(err)
        lines.append(f"{where}: {msg}")
    return lines


def error_message(err: Mapping[str, Any]) -> str:
    """One pydantic error's message as afpbench words it: pydantic's "Value error, " prefix dropped."""
    return str(err.get("msg", "invalid value")).removeprefix("Value error, ")


def as_message(lines: Sequence[str]) -> str:
    """The problems as a spec's message: one on the same line, several counted and listed beneath."""
    if len(lines) == 1:
        return lines[0]
    return f"{len(lines)} problems:" + "".join(f"\n  {line}" for line in lines)


def _unknown_field(root: type[BaseModel], loc: tuple[int | str, ...]) -> str:
    known = _field_names_at(root, loc[:-1])
    close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
    if close:
        return f"unknown field; did you mean '{close[0]}'?"
    return "unknown field" + (f" (known here: {', '.join(known)})" if known else "")


def _field_names_at(root: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The field names of the model reached by following `loc` from `root` (list indexes skipped)."""
    model: type[BaseModel] | None = root
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(str(part)) if model else None
        model = _model_in(field.annotation) if field else None
        if model is None:
            return []
    return list(model.model_fields) if model else []


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model inside an annotation such as list[ModelSpec] or Limits | None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (list, typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found:
                return found
    return None
