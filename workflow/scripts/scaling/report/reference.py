"""When the seed paper's published points may be drawn next to ours: only where the study measured
the same workload (shared DESIGN.md section 6): KAN [2, w, 1] with w = 64 (w in 32..256 for the
model-size sweep), grid 10, and the paper's sample counts (strong 100K, weak 25K per rank, comm and
model size 50K). What still differs (hardware, implementation, batch, repeats) goes into the label.

Which baseline the paper's speedups use: its code (simple_main.py of the public repository,
commit d68376f) wraps the model in DistributedDataParallel only when world_size > 1, so its 1-GPU
point is a plain, non-DDP model; the paper's text, as transcribed here, does not say.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from ..common.columns import model_family

PAPER = {
    "strong": {"widths": {(2, 64, 1)}, "samples": 100000, "per_rank": False},
    "weak": {"widths": {(2, 64, 1)}, "samples": 25000, "per_rank": True},
    "comm": {"widths": {(2, 64, 1)}, "samples": 50000, "per_rank": False},
    "model_size": {"widths": {(2, w, 1) for w in (32, 64, 128, 256)}, "samples": 50000, "per_rank": False},
}
REFERENCE_DIRS = {"seed-paper-a100": Path(__file__).resolve().parents[3] / "report" / "reference"}
PAPER_GRID = 10
PAPER_BATCH = 512
PAPER_LABEL = "seed paper (A100, pykan, one run per point)"
PAPER_BASELINE = ("The seed paper's speedups and efficiencies compare to a non-DDP 1-GPU run: its code wraps the "
                  "model in DistributedDataParallel only when world_size > 1 (simple_main.py, public repository "
                  "commit d68376f); the paper's text does not say which baseline it uses.")


def widths_of(model: str) -> tuple[int, ...] | None:
    m = re.search(r"\[([\d,\s]+)\]", str(model))
    return tuple(int(x) for x in m.group(1).split(",")) if m else None


def comparable(experiment: str, table: pd.DataFrame | None) -> dict:
    """{'comparable': bool, 'why_not': [...], 'differs': [...]} for one experiment's measured rows."""
    spec = PAPER.get(experiment)
    if spec is None or table is None or table.empty:
        return {"comparable": False, "why_not": ["no measured point"], "differs": []}
    t = table[table["n_ok"] > 0] if "n_ok" in table else table
    if t.empty:
        return {"comparable": False, "why_not": ["no measured point"], "differs": []}
    why = []
    widths = {widths_of(m) for m in t["model"]}
    if None in widths:  # a model named by its source (an imported table's model column): not a KAN's widths
        why.append("models " + ", ".join(sorted({str(m) for m in t["model"] if widths_of(m) is None}))
                   + " (paper: KAN widths " + ", ".join(str(list(w)) for w in sorted(spec["widths"])) + ")")
    elif not widths <= spec["widths"]:
        why.append("widths " + ", ".join(str(list(w)) for w in sorted(widths, key=str)) + " (paper: "
                   + ", ".join(str(list(w)) for w in sorted(spec["widths"])) + ")")
    grids = set(t["grid_size"].dropna().astype(int)) if "grid_size" in t else set()
    if grids != {PAPER_GRID}:
        why.append(f"grid {', '.join(map(str, sorted(grids))) or 'unknown'} (paper: {PAPER_GRID})")
    samples = t["samples"] / t["world_size"] if spec["per_rank"] else t["samples"]
    got = set(samples.dropna().astype(int))
    if got != {spec["samples"]}:
        unit = " per rank" if spec["per_rank"] else ""
        why.append(f"samples{unit} {', '.join(f'{s:,}' for s in sorted(got)) or 'unknown'} (paper: {spec['samples']:,})")
    families = sorted({model_family(m) for m in t["model"]})
    differs = ["hardware (paper: A100, InfiniBand)"]
    if families != ["pykan"]:  # a pykan study runs the paper's implementation
        differs.append(f"implementation {', '.join(families)} (paper: pykan)")
    differs.append("one run per point in the paper")
    batches = set(t["batch_per_rank"].dropna().astype(int)) if "batch_per_rank" in t else set()
    if batches and batches != {PAPER_BATCH}:
        differs.append(f"per-rank batch {', '.join(map(str, sorted(batches)))} (paper: {PAPER_BATCH})")
    return {"comparable": not why, "why_not": why, "differs": differs}


def overlay_label(check: dict) -> str:
    return f"{PAPER_LABEL}; differs: " + "; ".join(check["differs"])


def overlay_note(experiment: str, check: dict) -> str:
    """The caption's word on the seed paper's points: only where they are drawn (the report says once,
    in its appendix, why they are not: sections.reference_notes)."""
    if check["comparable"]:
        return "Seed-paper overlay shown; it differs in " + "; ".join(check["differs"]) + "."
    return ""


def load_reference(name: str | None) -> dict[str, pd.DataFrame]:
    """The seed paper's per-point CSVs (strong, weak, comm, model_size) by the config's
    report.reference name, found next to the scripts; {} for none."""
    folder = REFERENCE_DIRS.get(name) if name else None
    if folder is None:
        return {}
    out = {}
    for part in ("strong", "weak", "comm", "model_size"):
        path = folder / f"{part}.csv"
        if path.exists():
            out[part] = pd.read_csv(path)
    return out
