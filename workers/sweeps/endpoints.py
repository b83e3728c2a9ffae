"""From a model in the spec to the Endpoint an adapter calls (default base URLs: families.py), and that
endpoint's preflight (providers/preflight.py, the adapter's probe) under the name the spec gives the model."""

from __future__ import annotations

from afpbench.workers.errors import SpecError
from afpbench.workers.providers.families import provider
from afpbench.workers.providers.preflight import preflight
from afpbench.workers.providers.types import Endpoint
from afpbench.workers.settings import get_settings
from afpbench.workers.sweeps.spec import ModelSpec


def base_url_for(model: ModelSpec) -> str:
    if model.base_url:
        return model.base_url
    row = provider(model.provider)
    if row.simulated:
        return get_settings().sim_url
    if row.default_base_url:
        return row.default_base_url
    raise SpecError(f"model {model.display}: provider {model.provider!r} needs a base_url")


def endpoint_for(model: ModelSpec) -> Endpoint:
    return Endpoint(
        provider=model.provider,
        model=model.model,
        base_url=base_url_for(model),
        api_key_env=model.api_key_env,
        params=dict(model.params),
        timeout_s=model.timeout_s,
    )


def preflight_model(model: ModelSpec) -> None:
    """The preflight of one of a spec's models or judges (providers/preflight.py), named as the spec names it."""
    preflight(endpoint_for(model), model.display)
