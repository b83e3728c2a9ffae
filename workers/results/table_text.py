"""Results tables as text files: Markdown (the report's md, the bundle's summary.md) and CSV (the bundle's
tables/<id>.csv). Renderers of any RenderedTable (workers/results/table_spec.py): they lay out the
heads and cells they are given and know no column by name."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence

from afpbench.workers.results.table_spec import RenderedTable


def md_cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(table: RenderedTable) -> list[str]:
    """A section: the heading, the note in italics, the table."""
    lines = [f"## {table.title}", ""]
    if table.note:
        lines += [f"_{md_cell(table.note)}_", ""]
    lines.append("| " + " | ".join(md_cell(c.header) for c in table.columns) + " |")
    lines.append("|" + "".join("---:|" if c.numeric else "---|" for c in table.columns))
    lines += ["| " + " | ".join(md_cell(cell) for cell in row) + " |" for row in table.rows]
    return lines


def csv_text(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue()


def table_csv(table: RenderedTable) -> str:
    """The table's column keys as the header row, then its cells as the report writes them."""
    return csv_text([c.key for c in table.columns], table.rows)
