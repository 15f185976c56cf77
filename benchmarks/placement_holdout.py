"""Predictions past what was measured, on public step-time tables (examples/public-tables/, cited in
its SOURCES.md): each table is imported through the generic table (plan/imports.py, as `make demo`
would), some placements are held out (report.holdout), and the placement model's predictions
(scaling/model/holdout.py) are scored against what was measured there, beside naive baselines:

    copy       the measured step of the largest fitted placement with the same GPUs a node (the
               nearest world size where none has them)
    line       a straight line in world size through the fitted DDP placements (least squares)
    p-model    the world-size performance model (model/fit.py predict_step: d + ring over p per link
               class), the model before placements

Schemes: "<=3 nodes -> 4" fits every placement of up to 3 nodes and predicts the 4-node ones; "<=2
nodes -> 3,4" fits up to 2 nodes; "1 node -> 8" fits one node's 1 to 4 GPUs and predicts its 8. Per
table and scheme: the mean |error| of each, how many held-out placements the model predicted, and
the coverage of its 95% intervals (a refused placement counts as covered: it said it could not tell).

    .venv/bin/python benchmarks/placement_holdout.py [folder of CSVs] [--rows]
"""

from __future__ import annotations

import math
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow" / "scripts"))
sys.path.insert(0, str(ROOT))

import plan  # noqa: E402
from plan import imports  # noqa: E402
from scaling.common.columns import clean, clean_allreduce  # noqa: E402
from scaling.model.fit import fit_all, predict_step, training_rows  # noqa: E402
from scaling.model.holdout import holdout  # noqa: E402
from scaling.tables.tidy import ALLREDUCE_COLUMNS, tidy_row  # noqa: E402


def read(path: Path) -> pd.DataFrame:
    return pd.read_csv(path)


def config_for(path: Path, table: pd.DataFrame, spec) -> dict:
    """A config that plans exactly the table's runs (weak scaling, one run per placement)."""
    b = int(table["batch_per_rank"].iloc[0])
    per_rank = int(table["samples"].iloc[0] // (table["nodes"].iloc[0] * table["gpus_per_node"].iloc[0]))
    tops = [{"nodes": int(n), "gpus_per_node": int(g)} for n, g in zip(table["nodes"], table["gpus_per_node"])
            if n * g > 1]
    return {"study": path.stem.replace("-", "_"), "device": "cuda", "repeats": 1,
            "import": {"format": "table", "path": str(path), "citation": "benchmark"},
            "model": {"impl": ["kanscale"], "widths": [2, 64, 1]}, "training": {"epochs": 1, "lr": 0.001},
            "experiments": {"weak": {"samples_per_rank": per_rank, "batch_per_rank": b, "non_ddp_baseline": True,
                                     "topologies": tops},
                            "allreduce": {"enabled": False}, "readiness": {"enabled": False}},
            "report": {"reference": "none", "max_gpus_per_node": int(table["gpus_per_node"].max()), "holdout": spec}}


def imported_frame(config: dict) -> pd.DataFrame:
    """measurements.csv as the workflow would write it from the import."""
    config = plan.validate_config(config)
    points = plan.build_points(config)
    runs = imports.match(points, imports.read_runs(config["import"]), "import")
    rows = [tidy_row(points[pid].to_json(), "ok", imports.imported_record(points[pid], run, config["import"]))
            for pid, run in runs.items()]
    return clean(pd.DataFrame(rows))


def baselines(df: pd.DataFrame, held: set[tuple[int, int]]) -> dict[tuple[int, int], dict]:
    train = training_rows(df)
    at = np.array([(int(n), int(g)) in held for n, g in zip(train["nodes"], train["gpus_per_node"])])
    kept = train[~at]
    ddp = kept[kept["world_size"] > 1]
    line = np.polyfit(ddp["world_size"], ddp["step_time_s"], 1) if ddp["world_size"].nunique() > 1 else None
    fit = fit_all(kept, clean_allreduce(pd.DataFrame(columns=ALLREDUCE_COLUMNS)))
    out = {}
    for r in train[at].itertuples():
        same = ddp[ddp["gpus_per_node"] == r.gpus_per_node]
        if len(same):
            copy = float(same.loc[same["nodes"].idxmax(), "step_time_s"])
        else:
            copy = float(ddp.iloc[(ddp["world_size"] - r.world_size).abs().argmin()]["step_time_s"])
        try:
            pm = float(predict_step(fit, r.family, r.placement_class, r.world_size, r.batch_per_rank, r.num_params,
                                    r.grads_bytes, r.oversub, r.busy_cores)[0])
        except Exception:  # noqa: BLE001 - the old model refuses some placements: no number
            pm = math.nan
        out[(int(r.nodes), int(r.gpus_per_node))] = {
            "copy": copy, "line": float(np.polyval(line, r.world_size)) if line is not None else math.nan,
            "p-model": pm}
    return out


SCHEMES = {
    "<=3 nodes -> 4": lambda t: [f"4x{g}" for g in t.loc[t["nodes"] == 4, "gpus_per_node"]]
    if {3, 4} <= set(t["nodes"]) else None,
    "<=2 nodes -> 3,4": lambda t: [f"{n}x{g}" for n, g in zip(t["nodes"], t["gpus_per_node"]) if n >= 3]
    if 3 in set(t["nodes"]) else None,
    "1 node -> 8": lambda t: ["1x8"] if ((t["nodes"] == 1) & (t["gpus_per_node"] == 8)).any()
    and ((t["nodes"] == 1) & (t["gpus_per_node"] == 4)).any() else None,
}


def score(path: Path, scheme: str, spec: list[str], show_rows: bool) -> dict:
    table = read(path)
    if scheme == "1 node -> 8":
        table = table[(table["nodes"] == 1) & (table["gpus_per_node"] <= 8)]
        path = Path("/tmp") / f"one_node_{path.name}"
        table.to_csv(path, index=False)
    elif scheme == "<=2 nodes -> 3,4":
        pass
    df = imported_frame(config_for(path, table, spec))
    out = holdout(df, clean_allreduce(pd.DataFrame(columns=ALLREDUCE_COLUMNS)), spec)
    rows = [r for rs in out.values() for r in rs]
    held = {(r["nodes"], r["gpus_per_node"]) for r in rows}
    base = baselines(df, held)
    err = {k: [] for k in ("model", "copy", "line", "p-model")}
    covered = predicted = extrapolation_said = 0
    widths = []
    for r in rows:
        m = r["measured_step_s"]
        b = base[(r["nodes"], r["gpus_per_node"])]
        for k in ("copy", "line", "p-model"):
            err[k].append(abs(b[k] / m - 1) * 100 if math.isfinite(b[k]) else math.nan)
        if r["predicted_step_s"] is None:
            covered += 1
        else:
            predicted += 1
            err["model"].append(abs(r["error_pct"]))
            iv = r["interval"]
            covered += bool(iv and iv[0] <= m <= iv[1])
            if iv:
                widths.append(iv[1] / iv[0])
        extrapolation_said += r["extrapolated"] is not None
        if show_rows:
            iv = r["interval"]
            print(f"  {path.stem:28s} {r['nodes']}x{r['gpus_per_node']} measured {m:.3f} predicted "
                  f"{r['predicted_step_s'] if r['predicted_step_s'] is None else round(r['predicted_step_s'], 3)} "
                  f"{[round(x, 3) for x in iv] if iv else None} copy {b['copy']:.3f} | {r.get('reason') or ''} "
                  f"{'; '.join(r['forms'][:2]) if r.get('forms') else ''}")
    mean = {k: float(np.nanmean(v)) if len(v) and not np.isnan(v).all() else math.nan for k, v in err.items()}
    return {"table": path.stem.replace("one_node_", ""), "scheme": scheme, "held": len(rows), "predicted": predicted,
            "coverage_pct": 100 * covered / len(rows) if rows else math.nan,
            "extrapolation_said": extrapolation_said,
            "hi/lo": float(np.median(widths)) if widths else math.nan, **{f"{k}_mae_pct": v for k, v in mean.items()}}


def main(folder: Path, show_rows: bool) -> None:
    warnings.simplefilter("ignore")
    results = []
    for path in sorted(folder.glob("*.csv")):
        table = read(path)
        for scheme, make in SCHEMES.items():
            spec = make(table)
            if spec:
                results.append(score(path, scheme, spec, show_rows))
    res = pd.DataFrame(results)
    pd.set_option("display.width", 200)
    print(res.round(1).to_string(index=False))
    for scheme, g in res.groupby("scheme"):
        print(f"{scheme}: model {g['model_mae_pct'].mean():.1f}% mean |error|, copy {g['copy_mae_pct'].mean():.1f}%, "
              f"line {g['line_mae_pct'].mean():.1f}%, p-model {g['p-model_mae_pct'].mean():.1f}%; "
              f"coverage {g['coverage_pct'].mean():.0f}%, median hi/lo {g['hi/lo'].median():.2f}; predicted {g['predicted'].sum()} of {g['held'].sum()}")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(Path(args[0]) if args else ROOT / "examples" / "public-tables", "--rows" in sys.argv)
