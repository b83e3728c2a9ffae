"""The viewer's renderer of a results table (workers/results/tables.py, rendered as text by
workers/results/table_spec.py): the note, then the table; numbers right-aligned (class n), every cell
escaped. It lays out the heads and cells it is given and knows no column by name."""

from __future__ import annotations

from afpbench.api.viewer import html as v
from afpbench.workers.results.table_spec import RenderedTable

NUMERIC = ' class="n"'


def results_table(table: RenderedTable, titled: bool = False) -> v.Safe:
    def cells(tag: str, values: list[str]) -> str:
        return "".join(f"<{tag}{NUMERIC if head.numeric else ''}>{v.e(value)}</{tag}>"
                       for head, value in zip(table.columns, values, strict=True))

    body = "".join(f"<tr>{cells('td', row)}</tr>" for row in table.rows)
    parts = [f"<h3>{v.e(table.title)}</h3>" if titled else "",
             f'<p class="muted">{v.e(table.note)}</p>' if table.note else "",
             f'<table class="results" id="{v.e(table.id)}"><thead><tr>{cells("th", [c.header for c in table.columns])}'
             f"</tr></thead><tbody>{body}</tbody></table>"]
    return v.join(parts)
