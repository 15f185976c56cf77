"""The DDP-readiness verdicts (kan/readiness.py) of a study's implementations, from their check
points' records: results/<study>/ddp_readiness.json = {implementation: [{check, pass, detail, fix}]},
keyed by the model name the tables use (kan-bspline, mlp, tiny_kan.py:build). A check point that
failed or has no record yet gives one entry saying so (`pass` null): no verdict is made up."""

from __future__ import annotations

from pathlib import Path

from kan import record as records

from ..common.columns import model_family
from .tidy import model_label

NOT_RUN_FIX = "run the workflow again: the check point runs again (its log is results/<study>/logs/<point>.log)"


def verdicts(points: list[dict], points_dir: Path) -> dict[str, list[dict]]:
    """{implementation: its checks} for every planned readiness point (Point.to_json() of each)."""
    out = {}
    for point in points:
        if point["experiment"] != "readiness":
            continue
        name, pid = model_family(model_label(point)), point["id"]
        path = Path(points_dir) / f"{pid}.json"
        try:
            rec = records.read(path, pid)
        except records.InvalidRecord as e:
            out[name] = [{"check": "ran", "pass": None, "detail": f"no verdict yet: {e}", "fix": NOT_RUN_FIX}]
            continue
        if rec["status"] != "ok":
            out[name] = [{"check": "ran", "pass": None, "detail": f"the check point {rec['status']}: {rec['reason']}",
                          "fix": NOT_RUN_FIX}]
            continue
        out[name] = [{k: c[k] for k in ("check", "pass", "detail", "fix")} for c in rec["readiness"]["checks"]]
    return out


def failed_checks(found: dict[str, list[dict]]) -> dict[str, list[str]]:
    """{implementation: the checks it failed}, only those with a failed check."""
    return {name: bad for name, checks in found.items() if (bad := [c["check"] for c in checks if c["pass"] is False])}


def drift_note(name: str, bad: list[str]) -> str:
    """What a guideline about `name` rests on when its readiness checks failed."""
    return (f"{name} failed the DDP-readiness check(s) {', '.join(bad)} (report: Is it ready for DDP?): its "
            f"numbers rest on replicas that are not kept in step, so read them as an upper bound of what a "
            f"correct DDP run of it gives")
