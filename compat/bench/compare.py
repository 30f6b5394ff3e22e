"""Put an earlier full run next to a new one: ``compare.py NEW.md OLD.json`` adds to every result
table of NEW.md (a `make bench` results file) a column with the ratio the same row had in the
run OLD.json holds (median Rockafka / median peer, as the table's own ratio), and prints how many
rows are at or ahead of the peer (ratio >= 1.0 where higher is better, <= 1.0 where lower is
better; the MiB/s view of the produce runs is not counted twice) and the rows furthest behind. The file is rewritten in place; nothing else is read.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

PEERS = ("kafka", "rocketmq")


def old_ratio(old: dict, table: str, case: str) -> float | None:
    rows = old.get(table) or {}
    ours = (rows.get(f"{case}|rockafka") or {}).get("values") or []
    for peer in PEERS:
        theirs = (rows.get(f"{case}|{peer}") or {}).get("values") or []
        if ours and theirs and statistics.median(theirs):
            return statistics.median(ours) / statistics.median(theirs)
    return None


def annotate(md: str, old: dict, old_label: str) -> tuple[str, list[tuple[str, str, float, bool]]]:
    """(the new text, [(table, case, ratio, lower_is_better)] of every row with a ratio)."""
    out: list[str] = []
    rows: list[tuple[str, str, float, bool]] = []
    table = ""
    lower = False
    ratio_col = -1
    for line in md.splitlines():
        if line.startswith("### "):
            table, ratio_col = line[4:].strip(), -1
        elif line.startswith("Unit:"):
            lower = "lower is better" in line
        elif line.startswith("| case |") and line.rstrip().endswith("| ratio |") and table:
            ratio_col = line.count("|") - 2
            line = line.rstrip() + f" ratio {old_label} |"
        elif line.startswith("|---") and ratio_col >= 0 and "ratio" in out[-1]:
            line = line.rstrip() + "---|"
        elif line.startswith("| ") and ratio_col >= 0:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            case = cells[0]
            try:
                if "(same runs)" not in table:  # the MiB/s view of the produce rows: counted once
                    rows.append((table, case, float(cells[ratio_col]), lower))
            except (ValueError, IndexError):
                pass
            prev = old_ratio(old, table, case)
            line = line.rstrip() + f" {prev:.2f} |" if prev is not None else line.rstrip() + " - |"
        elif not line.startswith("|"):
            ratio_col = -1 if line.startswith("#") else ratio_col
        out.append(line)
    return "\n".join(out) + "\n", rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("new_md", type=Path)
    ap.add_argument("old_json", type=Path)
    args = ap.parse_args(argv)
    label = re.sub(r"\.json$", "", args.old_json.name)
    text, rows = annotate(args.new_md.read_text(), json.loads(args.old_json.read_text()), label)
    args.new_md.write_text(text)
    ahead = [r for r in rows if (r[2] <= 1.0 if r[3] else r[2] >= 1.0)]
    behind = sorted((r for r in rows if r not in ahead), key=lambda r: (1 / r[2]) if r[3] else r[2])
    print(f"{len(ahead)} of {len(rows)} rows at or ahead of the peer; behind, worst first:")
    for table, case, ratio, lower in behind:
        print(f"  {ratio:.2f}{' (lower is better)' if lower else ''}  {table} / {case}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
