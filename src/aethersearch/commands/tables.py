"""Terminal tables that fit 100 columns: the key columns repeat and the value columns split in order.

A per-source score table with five metrics and their intervals is about 140 columns wide, wider than
a terminal or a CI log reads well. Rather than drop metrics or let rich squeeze cells into wrapped
fragments, the value columns are cut into consecutive groups, each shown beside the same key columns,
so every figure is printed whole and every row stays on one line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, NamedTuple

__all__ = ["Column", "MAX_TABLE_WIDTH", "fitted_tables", "print_fitted"]

#: the widest table a command prints, in terminal columns
MAX_TABLE_WIDTH = 100


class Column(NamedTuple):
    """A column header and its alignment."""

    header: str
    justify: Literal["left", "right"] = "left"


def _table(title: str, columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> Any:
    from rich.table import Table

    table = Table(title=title)
    for column in columns:
        table.add_column(column.header, justify=column.justify)
    for row in rows:
        table.add_row(*row)
    return table


def _width(table: Any) -> int:
    from rich.console import Console
    from rich.measure import Measurement

    console = Console(width=10_000)
    return int(Measurement.get(console, console.options, table).maximum)


def fitted_tables(title: str, keys: Sequence[Column], values: Sequence[Column], rows: Sequence[Sequence[str]],
                  width: int = MAX_TABLE_WIDTH) -> list[Any]:
    """Rich tables of ``rows`` (key cells then value cells) each at most ``width`` wide where one value fits.

    Value columns keep their order; a split table's title says which part it is.
    """
    groups: list[list[int]] = []
    for i in range(len(values)):
        trial = [*groups[-1], i] if groups else [i]
        if groups and _width(_part("", keys, values, rows, trial)) <= width:
            groups[-1] = trial
        else:
            groups.append([i])
    if len(groups) <= 1:
        return [_part(title, keys, values, rows, list(range(len(values))))]
    return [_part(f"{title} ({n} of {len(groups)})", keys, values, rows, group)
            for n, group in enumerate(groups, start=1)]


def _part(title: str, keys: Sequence[Column], values: Sequence[Column], rows: Sequence[Sequence[str]],
          chosen: list[int]) -> Any:
    k = len(keys)
    return _table(title, [*keys, *(values[i] for i in chosen)],
                  [[*row[:k], *(row[k + i] for i in chosen)] for row in rows])


def print_fitted(console: Any, title: str, keys: Sequence[Column], values: Sequence[Column],
                 rows: Sequence[Sequence[str]]) -> None:
    """Print :func:`fitted_tables` one after the other."""
    for table in fitted_tables(title, keys, values, rows):
        console.print(table)
