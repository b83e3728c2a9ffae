"""The sweep spec as the HTTP API accepts it: the spec file's fields, minus everything that reaches
into the server.

- No server paths: `fixtures.dir`, `instructions.dir` and a `judge_prompt` string (a file path) are
  refused, naming the field. Inputs come inline or by name from the operator's catalogue
  (workers/sweeps/sources.py); `dir: null` (the packaged sets) stays allowed.
- Base URLs only from the operator's allow-list (AFP_ALLOWED_BASE_URLS, workers/providers/url_policy.py).
- Key variables only from the operator's allow-list (AFP_KEY_VARS), like a spec file.

A posted body holding `judge_prompt: /proc/self/environ` once sent the server's environment to a judge
of the client's choosing; these classes are why it cannot.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from afpbench.workers.providers import key_policy
from afpbench.workers.providers.url_policy import api_refusal
from afpbench.workers.sweeps.sources import FixtureSource, InstructionSource, JudgePromptSource
from afpbench.workers.sweeps.spec import ModelSpec, SweepSpec

_NO_PATHS = ("a server path is not accepted over the HTTP API; send the {what} inline ({field}.inline) or "
             "name an entry of the server's catalogue ({field}.name)")


class PostedModelSpec(ModelSpec):
    @field_validator("model")
    @classmethod
    def _model_stays_in_its_path(cls, v: str) -> str:
        # Anthropic and Gemini put the model name in the URL path: '?', '#', '%' or '..' there would take
        # the request past the allowed base URL ("x/../../internal?").
        if set("?#%\\") & set(v) or any(c.isspace() for c in v) or {".", ".."} & set(v.split("/")):
            raise ValueError("model may not contain '?', '#', '%', '\\', whitespace or '.'/'..' path segments")
        return v

    @field_validator("base_url")
    @classmethod
    def _allowed_base_url(cls, v: str | None) -> str | None:
        if v is not None and (why := api_refusal(v)):
            raise ValueError(f"base_url {why}")
        return v

    @field_validator("api_key_env")
    @classmethod
    def _allowed_key(cls, v: str | None) -> str | None:
        if v is not None and (why := key_policy.refusal(v)):
            raise ValueError(why)
        return v


class PostedFixtureSource(FixtureSource):
    dir: None = Field(default=None, description="not accepted over the HTTP API (null: the packaged pilot set)")

    @field_validator("dir", mode="before")
    @classmethod
    def _no_dir(cls, v: Any) -> None:
        if v is not None:
            raise ValueError(_NO_PATHS.format(what="fixtures", field="fixtures"))
        return None


class PostedInstructionSource(InstructionSource):
    dir: None = Field(default=None, description="not accepted over the HTTP API (null: the packaged A-D texts)")

    @field_validator("dir", mode="before")
    @classmethod
    def _no_dir(cls, v: Any) -> None:
        if v is not None:
            raise ValueError(_NO_PATHS.format(what="instruction texts", field="instructions"))
        return None


class PostedSweepSpec(SweepSpec):
    """POST /sweeps: the spec as JSON. Inputs are data (inline) or catalogue names, never server paths."""

    # A narrower item type than SweepSpec's (every PostedModelSpec is a ModelSpec; pydantic validates and
    # documents the posted form). mypy's list invariance cannot see that no code appends a plain ModelSpec.
    models: list[PostedModelSpec] = Field(min_length=1)  # type: ignore[assignment]  # see above
    # Required like SweepSpec.judges (its `_judges_written` validator runs here too): `judges: []` to run without.
    judges: list[PostedModelSpec] = Field(default=None, validate_default=True)  # type: ignore[assignment]  # see above
    fixtures: PostedFixtureSource = Field(default_factory=PostedFixtureSource)
    instructions: PostedInstructionSource = Field(default_factory=PostedInstructionSource)
    judge_prompt: JudgePromptSource | None = Field(
        default=None, description="{inline: text} or {name: catalogue entry}; null: the packaged prompt"
    )

    @field_validator("judge_prompt", mode="before")
    @classmethod
    def _no_path(cls, v: Any) -> Any:
        if isinstance(v, str):
            raise ValueError(_NO_PATHS.format(what="judge prompt", field="judge_prompt"))
        return v
