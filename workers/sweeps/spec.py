"""The sweep spec: a YAML file that declares models, judges, conditions, fixtures and repeats.

Everything here is sealed with the sweep (secrets are never in a spec: a model names the environment
variable that holds its key). See docs/SPEC.md for the documented format. This module is the schema;
reading one from data or a file: spec_loading.py; literal credentials: spec_secrets.py.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator

from afpbench.reference.hashing import json_sha256
from afpbench.reference.protocol_facts import CONDITIONS, HIGH_RISK_MIN_REPEATS, Condition
from afpbench.reference.values import Count, Number
from afpbench.scoring.comparison_family import ConditionPair, declared_family, default_family
from afpbench.scoring.rules import DisputeRule, PassRule
from afpbench.workers.limits.base import Limits
from afpbench.workers.providers import key_policy
from afpbench.workers.providers.families import PROVIDERS
from afpbench.workers.providers.structured import STRUCTURED_OUTPUT_PARAM, param_problem
from afpbench.workers.providers.url_policy import base_url_problem
from afpbench.workers.spec_values import Line, StrictModel, checked_base_url, refuse_unstorable
from afpbench.workers.sweeps.prices import Prices
from afpbench.workers.sweeps.sources import FixtureSource, InstructionSource, JudgePromptSource
from afpbench.workers.sweeps.spec_secrets import literal_secret_at

NO_JUDGES = ("missing: add judges: [...] or write judges: [] to run without judges: every answered cell "
             "then ends GRADER_DISPUTE")
# Afpbench's own secrets can never be named as a provider key: a spec (perhaps posted to
# the HTTP API) could otherwise send them as a bearer token to any base_url it names.
RESERVED_KEY_VARIABLES = key_policy.RESERVED_KEY_VARIABLES


class ModelSpec(StrictModel):
    provider: str
    model: Line = Field(min_length=1, max_length=200)
    label: Line | None = Field(default=None, max_length=200)
    base_url: Line | None = None
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Z_][A-Z0-9_]*$")
    params: dict[str, Any] = Field(default_factory=dict)
    limits: Limits = Field(default_factory=Limits)
    prices: Prices = Field(default_factory=Prices)
    timeout_s: Number = Field(default=120.0, gt=0, le=3600)
    # How its calls are sent (docs/SPEC.md "Lanes"; which lane a cell takes: workers/sweeps/lanes.py).
    lane: Literal["sync", "batch", "auto"] = "sync"

    @model_validator(mode="before")
    @classmethod
    def _no_literal_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for k in ("api_key", "key", "token", "authorization"):
                if k in data:
                    raise ValueError(
                        f"'{k}' is not allowed in a spec: put the key in an environment variable "
                        "and name that variable in 'api_key_env'"
                    )
        return data

    @field_validator("api_key_env")
    @classmethod
    def _allowed_key_variable(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is not None and (reserved := key_policy.reserved_refusal(v)):
            raise ValueError(reserved)
        if v is not None and (info.context or {}).get("operator_policy"):  # spec_loading.py:OPERATOR_POLICY
            why = key_policy.refusal(v)
            if why:
                raise ValueError(why)
        return v

    @field_validator("provider")
    @classmethod
    def _provider(cls, v: str) -> str:
        if v not in PROVIDERS:
            raise ValueError(f"unknown provider {v!r}; known: {', '.join(sorted(PROVIDERS))}")
        return v

    @model_validator(mode="after")
    def _lane(self) -> ModelSpec:
        if self.lane == "batch" and not PROVIDERS[self.provider].batch:
            raise ValueError(f"lane: batch: provider {self.provider!r} has no batch API here; use sync or auto "
                             f"(providers with one: {', '.join(sorted(n for n, p in PROVIDERS.items() if p.batch))})")
        return self

    @field_validator("params")
    @classmethod
    def _structured_output(cls, v: dict[str, Any]) -> dict[str, Any]:
        problem = param_problem(v[STRUCTURED_OUTPUT_PARAM]) if STRUCTURED_OUTPUT_PARAM in v else None
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, v: str | None) -> str | None:
        if v is None:
            return v
        # Query strings, fragments, user info and path tricks first; the value is not echoed: it is the
        # client's, and a refused one may hold what they should not send.
        if problem := base_url_problem(v):
            raise ValueError(f"base_url {problem}")
        return checked_base_url(v)  # scheme (any case), host, port

    @property
    def family(self) -> str:
        return PROVIDERS[self.provider].family

    @property
    def simulated(self) -> bool:
        return PROVIDERS[self.provider].simulated

    @property
    def display(self) -> str:
        return self.label or f"{self.provider}/{self.model}"

    def identity(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "model": self.model,
            "base_url": self.base_url,
            "params": self.params,
        }

    @property
    def model_hash(self) -> str:
        return json_sha256(self.identity())[:16]


# 3 of the 4 default calibration answers: above the half that a judge always saying pass (or fail) gets.
DEFAULT_MIN_AGREEMENT = 0.75


class JudgeCheckSpec(StrictModel):
    """A few calls to each judge on the calibration answers before the sweep (workers/grading/judge_check.py):
    a judge that agrees with their known verdicts on less than `min_agreement` of them stops the run.
    `enabled: null` (the default): on for every judge that is not simulated."""

    enabled: bool | None = None
    answers: Count = Field(default=4, ge=1, le=20)
    min_agreement: Number = Field(default=DEFAULT_MIN_AGREEMENT, gt=0, le=1)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"enabled": data} if isinstance(data, bool) else data

    def applies_to(self, judge: ModelSpec) -> bool:
        return (not judge.simulated) if self.enabled is None else self.enabled


# Keys of the resolved spec left out while they hold their default (None): a spec written before they
# existed resolves, and so seals, exactly as it did.
_LEFT_OUT_AT_DEFAULT = ("comparisons", "judge_check", "budget")
# Keys inside a section left out while they hold their default: (section, key, default).
_SECTION_LEFT_OUT_AT_DEFAULT = (("judge_check", "min_agreement", DEFAULT_MIN_AGREEMENT),)
# The same for each model's and judge's keys of the batch lane: lane, batch quota, batch prices.
_ENTRY_LEFT_OUT_AT_DEFAULT = ((None, "lane", "sync"), ("limits", "batch_queue_tokens", None),
                              ("prices", "batch_input_per_mtok", None), ("prices", "batch_output_per_mtok", None))


def _judges_required(schema: dict[str, Any]) -> None:
    """The JSON schema (OpenAPI) shows `judges` as required, which is what the validator enforces."""
    schema["properties"]["judges"].pop("default", None)
    schema["required"] = [*schema.get("required", []), "judges"]


class BudgetSpec(StrictModel):
    """A ceiling on the sweep's spend, sealed with it: the release stops sending once what was spent plus
    what is in flight would pass it (workers/cells/budget.py); the cells never sent stay "not run"."""

    usd: Number = Field(gt=0)



class SweepSpec(StrictModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_judges_required)

    name: Line = Field(default="sweep", min_length=1, max_length=200)
    models: list[ModelSpec] = Field(min_length=1)
    # Required, but checked by a validator (not by pydantic's "Field required") so that the refusal says
    # what to write, and is listed with every other error of the spec (docs/SPEC.md, "Judges").
    judges: list[ModelSpec] = Field(default=None, validate_default=True)  # type: ignore[assignment]
    conditions: list[Condition] = Field(default_factory=lambda: list(CONDITIONS), min_length=1)
    fixtures: FixtureSource = Field(default_factory=FixtureSource)
    instructions: InstructionSource = Field(default_factory=InstructionSource)
    # A string is a file path (spec files only); null: the packaged prompt.
    judge_prompt: Line | JudgePromptSource | None = None
    repeats: Count = Field(default=1, ge=1, le=1000)
    high_risk_repeats: Count = Field(default=HIGH_RISK_MIN_REPEATS, ge=1, le=1000)
    pass_rule: PassRule = Field(default_factory=PassRule)  # scoring/rules.py: defaults and ranges
    dispute_rule: DisputeRule = Field(default_factory=DisputeRule)
    # Pairs of conditions, ["D", "A"] or "D vs A" (first minus second); null: every pair of `conditions`.
    comparisons: list[list[str] | str] | None = None
    judge_check: JudgeCheckSpec | None = None
    budget: BudgetSpec | None = None

    @model_validator(mode="before")
    @classmethod
    def _no_literal_secrets(cls, data: Any) -> Any:
        # Also here, not only in parse_spec: the HTTP API validates posted specs with this model directly.
        where = literal_secret_at(data)
        if where:
            raise ValueError(f"{where}: looks like a literal credential; name an environment variable in 'api_key_env'")
        return data

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any) -> Any:
        # Over the whole raw spec, so free-form parts (params, sent in the request body) are covered too.
        refuse_unstorable(cls.__name__, data)
        return data

    @field_validator("judges", mode="before")
    @classmethod
    def _judges_written(cls, v: Any) -> Any:
        # Without judges every answered cell ends GRADER_DISPUTE; that must be a choice, not an omission.
        if v is None:
            raise ValueError(NO_JUDGES)
        return v

    @field_validator("conditions")
    @classmethod
    def _conditions(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("conditions must not repeat")
        return sorted(v)

    @model_validator(mode="after")
    def _unique_models(self) -> SweepSpec:
        hashes = [m.model_hash for m in self.models]
        if len(set(hashes)) != len(hashes):
            raise ValueError("two models have the same provider, model, base_url and params")
        return self

    @model_validator(mode="after")
    def _comparisons(self) -> SweepSpec:
        if self.comparisons is not None:  # checked whole (comparison_family.py), stored as [first, second]
            family = declared_family(self.comparisons, self.conditions)
            self.comparisons = [[p.first, p.second] for p in family]
        return self

    def comparison_family(self) -> list[ConditionPair]:
        """The comparisons this sweep reports, Holm runs over and `plan` plans: declared, else every pair."""
        if self.comparisons is None:
            return default_family(self.conditions)
        return declared_family(self.comparisons)

    def judge_check_settings(self) -> JudgeCheckSpec:
        return self.judge_check or JudgeCheckSpec()

    @model_validator(mode="after")
    def _budget_needs_prices(self) -> SweepSpec:
        if self.budget is None:
            return self
        unpriced = [f"{role} {m.display}" for role, ms in (("model", self.models), ("judge", self.judges))
                    for m in ms if not m.prices.declared]
        if unpriced:
            raise ValueError(f"budget: {', '.join(unpriced)} declares no prices (prices: {{input_per_mtok, "
                             "output_per_mtok}); a budget cannot count what has no price")
        return self

    @model_validator(mode="after")
    def _judges_sync(self) -> SweepSpec:  # judge calls take the sync lane (docs/SPEC.md, "lane")
        if batched := [j.display for j in self.judges or [] if j.lane == "batch"]:
            raise ValueError(f"judges: lane: batch is not supported for judges ({', '.join(batched)}); use sync")
        return self

    def high_risk_repeat_count(self) -> int:
        """High-risk fixtures need at least three repeats per condition before comparisons publish."""
        return max(self.high_risk_repeats, self.repeats, HIGH_RISK_MIN_REPEATS)

    def resolved(self) -> dict[str, Any]:
        """The spec with every default filled in: what is stored and sealed (comparisons, judge_check, budget
        and batch prices only when written: a spec from before they existed seals as it did)."""
        data = self.model_dump(mode="json")
        for key in _LEFT_OUT_AT_DEFAULT:
            if data[key] is None:
                del data[key]
        for name, inner, value in _SECTION_LEFT_OUT_AT_DEFAULT:
            if name in data and data[name].get(inner) == value:
                del data[name][inner]
        for entry in [*data["models"], *data["judges"]]:
            for section, key, default in _ENTRY_LEFT_OUT_AT_DEFAULT:
                holder = entry[section] if section else entry
                if holder.get(key, default) == default:
                    holder.pop(key, None)
        return data
