"""Numbers every validated input shares (a sweep spec, its pass and dispute rules): a count or a
number is never a boolean. Lax pydantic reads `true` as 1: `repeats: true` would quietly mean one
repeat, `burst: false` zero. Refusals name the field, never the value."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator
from pydantic_core import PydanticCustomError


def _no_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise PydanticCustomError("bool_not_number", "expected a number, got the boolean {value}",
                                  {"value": str(value).lower()})
    return value


Count = Annotated[int, BeforeValidator(_no_bool)]
Number = Annotated[float, BeforeValidator(_no_bool)]  # finite where the model sets allow_inf_nan=False
