"""A model's or judge's declared prices (a part of the spec, sweeps/spec.py): US dollars per million tokens
on the sync lane and, where declared, on the batch lane. Read by the cost rule (scoring/measures.py) and the
cost plan."""

from __future__ import annotations

from pydantic import Field

from afpbench.reference.values import Number
from afpbench.workers.spec_values import StrictModel


class Prices(StrictModel):
    """US dollars per million tokens, as declared by the user (for cost reporting only)."""

    input_per_mtok: Number = Field(default=0, ge=0)
    output_per_mtok: Number = Field(default=0, ge=0)
    cached_per_mtok: Number = Field(default=0, ge=0)
    reasoning_per_mtok: Number = Field(default=0, ge=0)
    # The provider's batch lane (about half price, answers within 24 h); None: not declared (the plan then
    # gives no batch-lane cost for this model).
    batch_input_per_mtok: Number | None = Field(default=None, ge=0)
    batch_output_per_mtok: Number | None = Field(default=None, ge=0)

    @property
    def declared(self) -> bool:
        """Some price is declared: an all-zero table is what a spec without `prices` gets."""
        return bool(self.input_per_mtok or self.output_per_mtok)

    def on_batch_lane(self) -> Prices:
        """The prices of an attempt on the batch lane: the batch prices where declared, else the sync ones."""
        return self.model_copy(update={
            "input_per_mtok": self.input_per_mtok if self.batch_input_per_mtok is None else self.batch_input_per_mtok,
            "output_per_mtok": self.output_per_mtok if self.batch_output_per_mtok is None
            else self.batch_output_per_mtok})
