"""Event-log lines as a table: one row per event, one column per field, for a chapter to show."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd


def events_table(events: Iterable[Any], fields: Sequence[str] | None = None) -> pd.DataFrame:
    """``time (ms)``, ``node`` and ``event`` columns, then one column per field of the events.

    ``fields`` picks and orders the field columns; by default every field appears, in the order it
    is first seen. A field an event lacks is left empty. Tuples and lists are shown as ``1, 2, 3``.
    """
    rows = []
    seen: dict[str, None] = {}
    for e in events:
        rows.append(e)
        seen.update(dict.fromkeys(e.fields))
    columns = list(seen) if fields is None else list(fields)
    table = pd.DataFrame(
        [
            {
                "time (ms)": e.time_ms,
                "node": "-" if e.node is None else str(e.node),
                "event": e.kind,
                **{k: _show(e.fields[k]) if k in e.fields else "" for k in columns},
            }
            for e in rows
        ],
        columns=["time (ms)", "node", "event", *columns],
    )
    return table


def _show(value: Any) -> Any:
    if isinstance(value, tuple | list | set | frozenset):
        items = sorted(value) if isinstance(value, set | frozenset) else value
        return ", ".join(str(v) for v in items)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


__all__ = ["events_table"]
