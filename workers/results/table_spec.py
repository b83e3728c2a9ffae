"""What a results table is, as data: typed columns (a head, a short head for 80 columns, how to get the
value from a typed summary row and how to write it) and a table (its rows in the summary, title, note).

The tables themselves are defined once, in workers/results/tables.py. Every medium renders them through
`Table.render`, which turns the typed rows into text cells: the terminal (api/display.py, narrow), the
report in md, html and json (api/report.py), the viewer (api/viewer/result_tables.py) and the export
bundle (workers/results/table_text.py: Markdown and CSV). A renderer knows tables and columns only as
this data, never a column by name.

How numbers are written (one way everywhere, scoring/units.py): rates in %, differences between two
rates in signed percentage points ("+12.5 pts"); one decimal in full, none in the 80-column terminal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Generic, TypeVar

from pydantic import Field

from afpbench.reference.loader import protocol
from afpbench.scoring.rates import Contract
from afpbench.scoring.units import percent, percent_interval, points, points_interval, points_size

R = TypeVar("R")
Row = TypeVar("Row", contravariant=True)  # a column of a base row type serves a table of a derived one
MISSING = "-"  # a value the row does not have (no scored cell, no pairs, no price)


@dataclass(frozen=True)
class Format:
    """How a value is written: in full (report, viewer, export) and narrow (the 80-column terminal).
    Numbers are right-aligned and never wrapped; text is left-aligned, and long text (`fold`) may fold."""

    full: Callable[[Any], str]
    narrow: Callable[[Any], str] | None = None
    numeric: bool = True
    fold: bool = False

    def text(self, value: object, narrow: bool) -> str:
        if value is None:
            return MISSING
        write = self.narrow if narrow and self.narrow is not None else self.full
        return write(value)


def _pair(write: Callable[[float, float], str]) -> Callable[[Any], str]:
    return lambda interval: write(interval[0], interval[1])


TEXT = Format(str, numeric=False, fold=True)  # labels and prose: folds at 80 columns
LABEL = Format(str, numeric=False)  # short words that never wrap: a condition, "C vs B", a state
COUNT = Format(str)
FRACTION = Format(lambda k_of_n: f"{k_of_n[0]}/{k_of_n[1]}")  # (k, n)
RATE = Format(percent, lambda x: percent(x, 0))
RATE_INTERVAL = Format(_pair(percent_interval), _pair(lambda lo, hi: percent_interval(lo, hi, 0, "-")))
DIFFERENCE = Format(points, lambda x: points(x, 0))  # percentage points
DIFFERENCE_SIZE = Format(points_size, lambda x: points_size(x, 0))  # unsigned: a detectable difference
# At 80 columns an interval drops its unit (the difference beside it and the note say points): the
# comparisons table holds two of them.
DIFFERENCE_INTERVAL = Format(_pair(points_interval), _pair(lambda lo, hi: points_interval(lo, hi, 0, unit=False)))
P_VALUE = Format(lambda p: f"{p:.4g}", lambda p: f"{p:.2g}")
COUNT_AND_SHARE = Format(lambda c_s: f"{c_s[0]} ({MISSING if c_s[1] is None else percent(c_s[1])})")  # (count, share)
MEAN_SCORE = Format(lambda x: f"{x:.2f}")
MEAN_TOKENS = Format(lambda x: f"{x:.1f}")
USD = Format(lambda x: f"${x:.4f}")
FLAG = Format(lambda flagged: "FLAGGED" if flagged else "ok", numeric=False)
YES_NO = Format(lambda yes: "yes" if yes else "no", numeric=False)


@dataclass(frozen=True)
class Column(Generic[Row]):
    """One column: `value` reads it from a typed row (a summary model), `format` writes it."""

    key: str  # the JSON and CSV name
    header: str
    value: Callable[[Row], object]
    format: Format = TEXT
    short: str = ""  # the head in the 80-column terminal ("" = the header)
    legend: bool = False  # the short head is spelled out under the terminal table
    wide: bool = False  # long prose: left out of the 80-column terminal table


class ColumnHead(Contract):
    key: str
    header: str
    numeric: bool = Field(description="a number: right-aligned, never wrapped")
    fold: bool = Field(description="long text that may fold onto more lines")


class TableColumn(Contract):
    key: str
    header: str


class TableRows(Contract):
    """A table in the JSON report and the HTTP API: its rows as text keyed by column key."""

    id: str
    title: str
    note: str
    columns: list[TableColumn]
    rows: list[dict[str, str]]


class RenderedTable(Contract):
    """A table's rows as text, for one medium (full or narrow): what every renderer lays out."""

    id: str
    title: str
    note: str
    columns: list[ColumnHead]
    rows: list[list[str]] = Field(description="one text per column, in column order")
    legend: list[str] = Field(default_factory=list, description="narrow only: each short head spelled out")

    def keyed(self) -> TableRows:
        """The rows keyed by column key (the JSON report's and the API's form)."""
        keys = [c.key for c in self.columns]
        return TableRows(id=self.id, title=self.title, note=self.note,
                         columns=[TableColumn(key=c.key, header=c.header) for c in self.columns],
                         rows=[dict(zip(keys, row, strict=True)) for row in self.rows])


@dataclass  # not frozen: adding a column is editing `columns`, in the one definition
class Table(Generic[R]):
    """A results table: its rows in the summary (`rows(summary)`, typed models), and its columns."""

    id: str
    title: str
    columns: tuple[Column[R], ...]
    rows: Callable[[Any], Iterable[R]]  # SweepSummary (or, for the terminal's tables, RunSummary) -> rows
    note: str | Callable[[Any], str] = ""  # a sentence, or one written from the summary

    def render(self, summary: Any, narrow: bool = False) -> RenderedTable:
        """The rows as text; narrow: the 80-column terminal's short heads and formats, prose left out."""
        columns = [c for c in self.columns if not (narrow and c.wide)]
        note = self.note(summary) if callable(self.note) else self.note
        heads = [ColumnHead(key=c.key, header=(c.short or c.header) if narrow else c.header,
                            numeric=c.format.numeric, fold=c.format.fold) for c in columns]
        rows = [[c.format.text(c.value(row), narrow) for c in columns] for row in self.rows(summary)]
        legend = [f"{c.short} {c.header}" for c in columns if narrow and c.legend and c.short]
        return RenderedTable(id=self.id, title=self.title, note=note, columns=heads, rows=rows, legend=legend)


def condition_legend(conditions: Iterable[str]) -> str:
    """What the condition letters stand for, from the protocol's own names (reference/protocol.yaml)."""
    names = protocol()["conditions"]
    return "conditions: " + "; ".join(f"{c} = {names[c]['name']}" if c in names else c for c in conditions)


# Columns most tables share.
MODEL: Column[Any] = Column("model", "model", attrgetter("model"))
CONDITION: Column[Any] = Column("condition", "condition", attrgetter("condition"), LABEL, short="cond")
