"""The sweep spec: a YAML file that declares models, judges, conditions, fixtures and repeats.

Everything here is sealed with the sweep (secrets are never in a spec: a model names the environment
variable that holds its key). See docs/SPEC.md for the documented format.
"""

from __future__ import annotations

import difflib
import types
import typing
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from afpbench.fixtures.loader import InputFileError, load_yaml, read_input_text
from afpbench.reference.hashing import json_sha256
from afpbench.workers.errors import SpecError
from afpbench.workers.limits.base import Limits
from afpbench.workers.providers import key_policy
from afpbench.workers.providers.families import PROVIDERS
from afpbench.workers.providers.structured import STRUCTURED_OUTPUT_PARAM, param_problem
from afpbench.workers.providers.url_policy import base_url_problem
from afpbench.workers.redact import mask_secrets
from afpbench.workers.spec_values import Count, Line, Number, StrictModel, checked_base_url, refuse_unstorable
from afpbench.workers.sweeps.sources import (
    FixtureSource,
    InstructionSource,
    JudgePromptSource,
    resolve_spec_paths,
)

CONDITIONS: tuple[Literal["A", "B", "C", "D"], ...] = ("A", "B", "C", "D")
NO_JUDGES = ("missing: add judges: [...] or write judges: [] to run without judges: every answered cell "
             "then ends GRADER_DISPUTE")
HIGH_RISK_MIN_REPEATS = 3
# Afpbench's own secrets can never be named as a provider key: a spec (perhaps posted to
# the HTTP API) could otherwise send them as a bearer token to any base_url it names.
RESERVED_KEY_VARIABLES = key_policy.RESERVED_KEY_VARIABLES
# Validation context of a spec that arrives from outside (a spec file, a posted body): also apply the
# operator's settings-dependent rules (the key allow-list). Stored specs are re-read without it: they
# were checked when accepted, and the key is checked again where it is read (types.key_for).
OPERATOR_POLICY = {"operator_policy": True}
# Spec fields whose content is input data (fixtures, instruction texts, a judge prompt): like a file's
# text they are not scanned for key-shaped strings (a fixture may be about a leaked key).
INLINE_DATA_PATHS = frozenset({"fixtures.inline", "instructions.inline", "judge_prompt.inline"})
# Mapping keys that mean "a credential is written here" anywhere in a spec (compared lower-case, '-' as '_').
_SECRET_FIELD_NAMES = frozenset(
    {"api_key", "apikey", "key", "token", "access_token", "authorization", "password", "secret", "x_api_key"}
)


class Prices(StrictModel):
    """US dollars per million tokens, as declared by the user (for cost reporting only)."""

    input_per_mtok: Number = Field(default=0, ge=0)
    output_per_mtok: Number = Field(default=0, ge=0)
    cached_per_mtok: Number = Field(default=0, ge=0)
    reasoning_per_mtok: Number = Field(default=0, ge=0)


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
        if v is not None and (info.context or {}).get("operator_policy"):
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


class PassRuleSpec(StrictModel):
    no_fatal: Literal[True] = True  # the protocol fixes this part: any fatal is a fail
    min_dimension: Count = Field(default=1, ge=0, le=2)
    min_total: Count = Field(default=6, ge=0, le=8)


class DisputeRuleSpec(StrictModel):
    pass_fail_disagreement: bool = True
    fatal_flag_disagreement: bool = True
    deterministic_fatal_rejected: bool = True
    dimension_gap: Count = Field(default=2, ge=1, le=2)
    max_parse_retries: Count = Field(default=2, ge=0, le=5)


def _judges_required(schema: dict[str, Any]) -> None:
    """The JSON schema (OpenAPI) shows `judges` as required, which is what the validator enforces."""
    schema["properties"]["judges"].pop("default", None)
    schema["required"] = [*schema.get("required", []), "judges"]


class SweepSpec(StrictModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_judges_required)

    name: Line = Field(default="sweep", min_length=1, max_length=200)
    models: list[ModelSpec] = Field(min_length=1)
    # Required, but checked by a validator (not by pydantic's "Field required") so that the refusal says
    # what to write, and is listed with every other error of the spec (docs/SPEC.md, "Judges").
    judges: list[ModelSpec] = Field(default=None, validate_default=True)  # type: ignore[assignment]
    conditions: list[Literal["A", "B", "C", "D"]] = Field(default_factory=lambda: list(CONDITIONS), min_length=1)
    fixtures: FixtureSource = Field(default_factory=FixtureSource)
    instructions: InstructionSource = Field(default_factory=InstructionSource)
    # A string is a file path (spec files only); null: the packaged prompt.
    judge_prompt: Line | JudgePromptSource | None = None
    repeats: Count = Field(default=1, ge=1, le=1000)
    high_risk_repeats: Count = Field(default=HIGH_RISK_MIN_REPEATS, ge=1, le=1000)
    pass_rule: PassRuleSpec = Field(default_factory=PassRuleSpec)
    dispute_rule: DisputeRuleSpec = Field(default_factory=DisputeRuleSpec)

    @model_validator(mode="before")
    @classmethod
    def _no_literal_secrets(cls, data: Any) -> Any:
        # Also here, not only in parse_spec: the HTTP API validates posted specs with this model directly.
        where = _literal_secret_at(data)
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

    def high_risk_repeat_count(self) -> int:
        """High-risk fixtures need at least three repeats per condition before comparisons publish."""
        return max(self.high_risk_repeats, self.repeats, HIGH_RISK_MIN_REPEATS)

    def resolved(self) -> dict[str, Any]:
        """The spec with every default filled in: what is stored and sealed."""
        return self.model_dump(mode="json")


def _describe(exc: ValidationError) -> str:
    """Every error of the spec, one line each (one error: on the same line as the source)."""
    lines = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        where = ".".join(str(p) for p in loc) or "(top level)"
        if err["type"] == "extra_forbidden" and loc:
            msg = _unknown_field(loc)
        else:
            msg = err["msg"].removeprefix("Value error, ")
        lines.append(f"{where}: {msg}")
    missing = f"judges: {NO_JUDGES}"
    if missing in lines and any(line.endswith("did you mean 'judges'?") and "." not in line.split(":")[0]
                                for line in lines):
        lines.remove(missing)  # the typo'd key already says where the judges went
    if len(lines) == 1:
        return lines[0]
    return f"{len(lines)} problems:" + "".join(f"\n  {line}" for line in lines)


def _unknown_field(loc: tuple) -> str:
    known = _field_names_at(loc[:-1])
    close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
    if close:
        return f"unknown field; did you mean '{close[0]}'?"
    return "unknown field" + (f" (known here: {', '.join(known)})" if known else "")


def _field_names_at(loc: tuple) -> list[str]:
    """The field names of the spec model reached by following `loc` from the top (list indexes skipped)."""
    model: type[BaseModel] | None = SweepSpec
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(str(part)) if model else None
        model = _model_in(field.annotation) if field else None
        if model is None:
            return []
    return list(model.model_fields) if model else []


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The spec model inside an annotation such as list[ModelSpec] or Limits | None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (list, typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found:
                return found
    return None


def _literal_secret_at(data: Any, path: str = "") -> str | None:
    """Where a spec holds a credential literally: a credential-named key, or a key-shaped value.

    The per-model check missed keys in `params` (sent in the request body) or in any
    other field; a spec is stored and sealed, so a literal key there would reach the database."""
    if isinstance(data, dict):
        for k, v in data.items():
            here = f"{path}.{k}" if path else str(k)
            if str(k).lower().replace("-", "_") in _SECRET_FIELD_NAMES:
                return here
            if here in INLINE_DATA_PATHS:
                continue
            found = _literal_secret_at(v, here)
            if found:
                return found
    elif isinstance(data, list):
        for i, v in enumerate(data):
            found = _literal_secret_at(v, f"{path}.{i}" if path else str(i))
            if found:
                return found
    elif isinstance(data, str) and any(c.isdigit() for c in data) and mask_secrets(data) != data:
        return path or "(top level)"
    return None


def parse_spec(data: Any, source: str = "spec", *, operator_policy: bool = False) -> SweepSpec:
    """A spec from its data. `operator_policy`: the spec arrives from outside (a file, a command line),
    so the rules that depend on this server's settings apply too (see OPERATOR_POLICY)."""
    if not isinstance(data, dict):
        what = "empty file" if data is None else type(data).__name__
        raise SpecError(f"{source}: expected a mapping of sweep fields, got {what}")
    where = _literal_secret_at(data)
    if where:
        raise SpecError(
            f"{source}: {where}: looks like a literal credential, which is not allowed in a spec: put the "
            "key in an environment variable and name that variable in 'api_key_env'"
        )
    try:
        return SweepSpec.model_validate(data, context=OPERATOR_POLICY if operator_policy else None)
    except ValidationError as exc:
        raise SpecError(f"{source}: {_describe(exc)}") from None


def load_spec(path: str | Path) -> SweepSpec:
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"{path}: spec file not found")
    try:
        # Size cap, UTF-8 check, alias bombs and duplicate keys (fixtures/loader.py).
        data = load_yaml(read_input_text(p))
    except InputFileError as exc:
        raise SpecError(f"{path}: {exc}") from None
    # Paths in a spec file mean what they say next to the file, whatever directory afpbench runs in.
    return resolve_spec_paths(parse_spec(data, str(path), operator_policy=True), p, str(path))


def demo_spec() -> SweepSpec:
    """The zero-configuration demo: every pilot fixture x A-D x the simulated model, judged by sim."""
    sim = {"provider": "sim", "model": "sim-1", "label": "sim (simulated)"}
    return parse_spec(
        {"name": "demo (simulated)", "models": [sim], "judges": [{**sim, "label": "sim-judge (simulated)"}]},
        "demo",
    )
