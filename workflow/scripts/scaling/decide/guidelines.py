"""The decide stage's entry point: every guideline, in report order, from the tables and model.json."""

from __future__ import annotations

import pandas as pd

from ..common.settings import Settings
from .accuracy import time_to_accuracy
from .comm import comm_share, inter_node
from .ddp_advice import ddp_setting_guidelines
from .deploy import held_out, recommendation
from .efficiency import per_rank_batch, strong_efficiency
from .memory import memory
from .overhead import not_communication
from .rules import Decide
from .stepbound import cite_bound, step_bound


def compute_guidelines(tables: dict, settings: Settings, model_json: dict | None = None,
                       critical: dict | None = None, holdout: dict | None = None) -> list[dict]:
    """All guidelines, in report order. `tables` as tables.all_tables.compute_tables returns (or read back
    from CSV); `model_json` = model.perf_model.fit_performance_model's output; `critical` =
    critical_batch.json (None: no batch experiment); `holdout` = holdout.json (report.holdout)."""
    eff = settings.efficiency_threshold
    d = Decide(settings.min_repeats, settings.decision_level)
    empty = pd.DataFrame(columns=["model", "world_size", "nodes", "gpus_per_node", "ddp", "placement_class",
                                  "batch_per_rank", "n_ok"])

    def get(name):
        t = tables.get(name)
        return empty.copy() if t is None else t.copy()

    strong, weak, comm, ms = get("strong"), get("weak"), get("comm"), get("model_size")
    need = {"strong": ["efficiency", "efficiency_ci_lo", "efficiency_ci_hi", "baseline_world_size"],
            "comm": ["inter_vs_intra_loss_pct", "inter_vs_intra_loss_pct_ci_lo", "inter_vs_intra_loss_pct_ci_hi",
                     "intra_samples_per_s", "intra_n_ok", "samples_per_s_mean"],
            "model_size": ["peak_mem_bytes_mean", "num_params", "params_per_gb", "mem_kind", "hidden_width"]}
    for name, t in (("strong", strong), ("comm", comm), ("model_size", ms), ("weak", weak)):
        for col in need.get(name, []) + [f"exposed_comm_pct_{s}" for s in ("mean", "ci_lo", "ci_hi")] + [
                f"compute_samples_per_s_per_rank_{s}" for s in ("mean", "ci_lo", "ci_hi")]:
            if col not in t:
                t[col] = pd.Series(dtype=float)
        if "ddp" not in t or t["ddp"].isna().all():
            t["ddp"] = True
        t["ddp"] = t["ddp"].fillna(True).astype(bool)
    out = []
    out += strong_efficiency(strong, eff, d)
    out += step_bound(tables.get("anatomy"), d)
    out += inter_node(comm, settings.inter_node_penalty_pct, d)
    out += not_communication([strong, weak, comm], model_json)
    for name, t in (("strong", strong), ("weak", weak), ("comm", comm)):
        out += comm_share(t, name, settings.comm_share_pct, d)
    for name, t in (("strong", strong), ("weak", weak)):
        out += per_rank_batch(t, name, eff, d)
    out += memory(ms, d)
    out += ddp_setting_guidelines(tables.get("ddp"), settings.ddp_loss_tolerance_pct, d, model_json)
    # with no held-out target, a fixed training-loss target (report.target_loss) still says which world
    # size trains to it soonest (runs imported from elsewhere have training loss only)
    out += time_to_accuracy(tables, d, model_json, critical, training_target=settings.target_loss is not None)
    out += recommendation(model_json, settings.model_max_mape_pct)
    out += held_out(holdout, settings.model_max_mape_pct)
    return cite_bound(out, model_json)
