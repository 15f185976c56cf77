"""The DDP-readiness verdicts (kan/probes/readiness.py) of a study's implementations, from their check
points' records: results/<study>/ddp_readiness.json = {model: [{check, pass, detail, fix}]} (the
CUDA-graph capture check also lists its `findings`: op, via, kind, where, path, count), keyed
by the check point's model by its display name, as every table names it (tidy.model_label:
kan-bspline [2,8,1], tiny_kan.py:build [2,8,1]). A check point that failed or has no record yet
gives one entry saying so (`pass` null): no verdict is made up."""

from __future__ import annotations

from pathlib import Path

from kan.contract import record as records

from ..common.columns import model_family
from .tidy import model_label

CAPTURE = "cuda_graph_capture"  # kan/probes/capture.py: whether the step can be a CUDA graph, not a DDP check
NOT_RUN_FIX = "run the workflow again: the check point runs again (its log is results/<study>/logs/<point>.log)"


def verdicts(points: list[dict], points_dir: Path) -> dict[str, list[dict]]:
    """{model: its checks} for every planned readiness point (Point.to_json() of each)."""
    out = {}
    for point in points:
        if point["experiment"] != "readiness":
            continue
        name, pid = model_label(point), point["id"]
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
        out[name] = [{k: c[k] for k in ("check", "pass", "detail", "fix", "findings") if k in c}
                     for c in rec["readiness"]["checks"]]
    return out


def failed_checks(found: dict[str, list[dict]]) -> dict[str, list[str]]:
    """{implementation: the DDP checks it failed}, only those with a failed check. By implementation
    (model_family: kan-bspline, tiny_kan.py:build), not by the checked model: one check point per
    implementation stands for every width and data set of it. The capture check is left out: a
    model that cannot be captured trains correctly without training.cuda_graphs, so its numbers
    need no note (a captured study that fails it is refused at plan time)."""
    return {model_family(name): bad for name, checks in found.items()
            if (bad := [c["check"] for c in checks if c["pass"] is False and c["check"] != CAPTURE])}


def drift_note(name: str, bad: list[str]) -> str:
    """What a guideline about `name` rests on when its readiness checks failed."""
    return (f"{name} failed the DDP-readiness check{'s' if len(bad) != 1 else ''} {', '.join(bad)} (report: Is it ready for DDP?): its "
            f"numbers rest on replicas that are not kept in step, so read them as an upper bound of what a "
            f"correct DDP run of it gives")
