"""Exit non-zero when an expectation of a study fails: for a CI job on a cluster.

    python workflow/scripts/check_expectations.py results/<study>/expectations.json [--allow-inconclusive]
                                                  [--allow-not-measured]

Prints one line per expectation. Exit status: 0 every expectation passed; 1 at least one failed (an
"inconclusive" or "not measured" one counts as failed unless allowed by its flag: a CI job should not
pass because the interval was too wide or the points did not run); 2 the file is missing or unreadable.
The file is written by the workflow's evaluate_expectations rule (config key report.expect).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ALLOWED = {"pass"}


def check(data: dict, allow_inconclusive: bool = False, allow_not_measured: bool = False) -> tuple[int, list[str]]:
    """(exit status, lines) for the parsed expectations.json."""
    allowed = ALLOWED | ({"inconclusive"} if allow_inconclusive else set()) | (
        {"not measured"} if allow_not_measured else set())
    lines, failed = [], 0
    for e in data["expectations"]:
        ok = e["status"] in allowed
        failed += not ok
        worst = [r for r in e["rows"] if r["status"] == e["status"]][:1]
        detail = f": {worst[0]['where']} = {_value(worst[0], e['unit'])}" if worst else (
            f": {e['reason']}" if e.get("reason") else "")
        lines.append(f"{'ok  ' if ok else 'FAIL'} {e['status']:<12} {e['name']}{detail}")
    total = len(data["expectations"])
    lines.append(f"{total - failed} of {total} expectation(s) met" + (
        "" if not failed else f"; {failed} not (inconclusive allowed: {allow_inconclusive}, "
                              f"not measured allowed: {allow_not_measured})"))
    return (1 if failed else 0), lines


def _value(row: dict, unit: str) -> str:
    v = row.get("value")
    if v is None:
        return f"not measured ({row.get('reason') or 'no ok repeat'})"
    scale, sfx = (100, "%") if unit == "fraction" else (1, "%" if unit == "%" else f" {unit}")
    txt = f"{scale * v:.4g}{sfx}"
    if row.get("ci_lo") is not None and row.get("ci_hi") is not None:
        txt += f" [95% CI {scale * row['ci_lo']:.4g}, {scale * row['ci_hi']:.4g}]"
    elif row.get("reason"):
        txt += f" ({row['reason']})"
    return txt


def load(path: str | Path) -> dict:
    """The parsed file; ValueError when it is not the workflow's expectations.json."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    items = data.get("expectations") if isinstance(data, dict) else None
    if not isinstance(items, list) or not all(isinstance(e, dict) and {"name", "status", "rows", "unit"} <= set(e)
                                              for e in items):
        raise ValueError("not an expectations.json: needs a list 'expectations' of {name, status, rows, unit}")
    return data


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path", help="results/<study>/expectations.json")
    ap.add_argument("--allow-inconclusive", action="store_true", help="an inconclusive expectation does not fail")
    ap.add_argument("--allow-not-measured", action="store_true", help="an expectation without data does not fail")
    args = ap.parse_args(argv)
    try:
        data = load(args.path)
    except (OSError, ValueError) as e:
        print(f"{args.path}: cannot read expectations ({type(e).__name__}: {e}); run the workflow with "
              f"report.expect set to write it", file=sys.stderr)
        return 2
    status, lines = check(data, args.allow_inconclusive, args.allow_not_measured)
    print("\n".join(lines))
    return status


if __name__ == "__main__":
    sys.exit(main())
