"""How the ``rockafka`` commands print results: aligned tables for people, ``--json`` for scripts.

A list of rows prints as a table with one header line and columns padded to the widest cell; a
single record prints as aligned ``key  value`` lines. Nested values (dicts, lists) print as compact
JSON inside a cell. With ``as_json`` the same data prints as indented JSON, keys sorted, so scripts
never parse the table.
"""

from __future__ import annotations

import json
from typing import Any, Sequence


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, separators=(",", ":"), default=str)
    return str(value)


def table_lines(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> list[str]:
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    out = ["  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip()]
    out += ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells]
    return out


def record_lines(record: dict[str, Any]) -> list[str]:
    width = max((len(k) for k in record), default=0)
    return [f"{k.ljust(width)}  {_cell(v)}".rstrip() for k, v in record.items()]


def emit(data: Any, as_json: bool, columns: Sequence[str] | None = None) -> None:
    if as_json:
        print(json.dumps(data, indent=2, sort_keys=True, default=str))
    elif isinstance(data, list) and columns:
        print("\n".join(table_lines(data, columns)))
    elif isinstance(data, dict):
        print("\n".join(record_lines(data)))
    elif isinstance(data, list):
        print("\n".join(_cell(x) for x in data))
    else:
        print(data)
