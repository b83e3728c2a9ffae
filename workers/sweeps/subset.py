"""Run a subset of a spec: `afpbench run SPEC --fixtures --conditions --models --limit --repeats`.

The overrides change the spec itself, before the sweep is created: the result is validated like any
spec and is what gets stored and sealed (`resolved()`), so `verify` and a reader of the stored spec see
exactly which subset ran. `--limit N` keeps the first N fixtures in id order (after `--fixtures`), the
way lm-eval's `--limit` keeps the first N samples: deterministic, and every kept fixture runs under
every kept condition, so paired comparisons stay paired. High-risk fixtures keep their repeat rule
(at least 3 per condition), so a limited run may have more than N cells per model and condition.
`--conditions` keeps the declared comparisons its conditions still make (none left: every pair of the
kept conditions): a subset compares what it runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from afpbench.workers.errors import SpecError
from afpbench.workers.sweeps.spec import SweepSpec
from afpbench.workers.sweeps.spec_loading import parse_spec


@dataclass(frozen=True)
class Subset:
    fixtures: list[str] | None = None
    conditions: list[str] | None = None
    models: list[str] | None = None  # a display label, a model name, or provider/model
    limit: int | None = None
    repeats: int | None = None

    @property
    def empty(self) -> bool:
        return all(v is None for v in (self.fixtures, self.conditions, self.models, self.limit, self.repeats))


def split_list(value: str | None, option: str) -> list[str] | None:
    """`P01,P08` -> ['P01', 'P08']; an option given with nothing in it is refused."""
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise SpecError(f"{option}: empty list; give comma-separated values, e.g. {option} A,D")
    return items


def _model_matches(model: dict[str, Any], name: str, display: str) -> bool:
    return name in (display, model["model"], f"{model['provider']}/{model['model']}")


def apply_subset(spec: SweepSpec, subset: Subset, source: str = "spec") -> SweepSpec:
    """The spec with the subset applied, validated again as a whole."""
    if subset.empty:
        return spec
    data = spec.resolved()
    if subset.models is not None:
        displays = [m.display for m in spec.models]
        unknown = [n for n in subset.models
                   if not any(_model_matches(m, n, d) for m, d in zip(data["models"], displays, strict=True))]
        if unknown:
            raise SpecError(f"--models: no model {', '.join(map(repr, unknown))} in {source}; "
                            f"it has: {', '.join(displays)}")
        data["models"] = [m for m, d in zip(data["models"], displays, strict=True)
                          if any(_model_matches(m, n, d) for n in subset.models)]
    if subset.conditions is not None:
        data["conditions"] = [c.upper() for c in subset.conditions]
        if data.get("comparisons") is not None:  # the declared pairs the kept conditions still make
            kept = [p for p in data["comparisons"] if set(p) <= set(data["conditions"])]
            data["comparisons"] = kept or None  # none left: every pair of what runs
    if subset.repeats is not None:
        data["repeats"] = subset.repeats
    if subset.fixtures is not None:
        data["fixtures"]["only"] = _deduplicated(subset.fixtures)
    narrowed = parse_spec(data, f"{source} with the subset options")
    if subset.limit is not None:
        from afpbench.workers.sweeps.inputs import load_inputs  # reads the fixture files: only for --limit

        ids = sorted(load_inputs(narrowed).fixtures)
        data["fixtures"]["only"] = ids[: subset.limit]
        narrowed = parse_spec(data, f"{source} with the subset options")
    return narrowed


def _deduplicated(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))
