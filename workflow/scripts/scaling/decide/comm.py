"""The communication guidelines: multi-node vs one-node throughput at equal world size (comm
experiment), and the points whose exposed communication exceeds its share of a step."""

from __future__ import annotations

import pandas as pd

from ..common.columns import SIMULATED, is_emulated
from .rules import (Decide, ci_text, deciding, guideline, key_of, more_repeats, rests_on, rounded, settle_text, side,
                    topo)


def inter_node(comm: pd.DataFrame, penalty_pct: float, d: Decide) -> list[dict]:
    """Multi-node vs intra-node throughput at equal world size (comm experiment): a loss above
    penalty_pct -> keep jobs within one node. Simulated inter-node placements give no advice."""
    min_repeats = d.min_repeats
    rule = (f"loss = 100 × (1 − multi-node / intra-node samples/s) at equal world size (comm experiment); loss > "
            f"{penalty_pct:g}% → keep jobs within one node, else spreading over nodes is fine; advice only when the "
            f"loss's {d.label} CI is on one side of {penalty_pct:g}% and both placements have ≥ {min_repeats} ok "
            f"repeats; never from ranks that shared one host")
    pairs = comm[comm["inter_vs_intra_loss_pct"].notna()] if len(comm) else comm
    if pairs is None or pairs.empty:
        return [guideline("inter-node", "comm", "not_enough_data", "communication points at the same world size both "
                          "within one node (1 x p) and across nodes (n x p/n), both with status ok.", rule,
                          {"threshold_pct": penalty_pct})]
    out = []
    for _, r in pairs.sort_values(["model", "world_size", "nodes"]).iterrows():
        loss = float(r["inter_vs_intra_loss_pct"])
        lo, hi = deciding(r, "inter_vs_intra_loss_pct")
        p = int(r["world_size"])
        gid = f"inter-node-{r['model']}-{int(r['nodes'])}x{int(r['gpus_per_node'])}"
        loss_txt = ci_text(loss, lo, hi, "{:.1f}%", d.label)
        nums = {"world_size": p, "placement": topo(r), "placement_class": r["placement_class"],
                "loss_pct": rounded(loss, 2), "loss_pct_ci": [rounded(lo, 2), rounded(hi, 2)],
                "inter_samples_per_s": rounded(r["samples_per_s_mean"], 1),
                "intra_samples_per_s": rounded(r["intra_samples_per_s"], 1), "threshold_pct": penalty_pct,
                "n_ok": int(r["n_ok"]), "intra_n_ok": int(r["intra_n_ok"])}
        head = f"{r['model']}: {topo(r)} vs 1x{p} at world size {p}: throughput loss {loss_txt}"
        if r["placement_class"] == SIMULATED:
            out.append(guideline(gid, "comm", "not_enough_data",
                                 f"{head}; both 'nodes' ran on one host, so this measures process placement on one "
                                 f"machine, not a network: no topology advice. Measure on two real nodes.", rule, nums))
            continue
        s = side(loss, lo, hi, penalty_pct)
        unsure = []
        intra_key = {**key_of(r), "nodes": 1, "gpus_per_node": p, "link_mbit": str(0.0)}
        for where, n_ok, key in ((topo(r), int(r["n_ok"]), key_of(r)), (f"1x{p}", int(r["intra_n_ok"]), intra_key)):
            k = more_repeats(n_ok, loss, lo, hi, penalty_pct, min_repeats)
            if s == "straddles" or n_ok < min_repeats:
                unsure.append((where, k, key))
        rests = [(topo(r), r["n_ok"]), (f"1x{p}", r["intra_n_ok"])]
        if unsure:
            out.append(rests_on(guideline(gid, "comm", "inconclusive", f"{head} — the data do not decide whether it "
                                          f"exceeds the {penalty_pct:g}% threshold.", rule, nums, settle_text(unsure),
                                          unsure), rests))
            continue
        keep = s == "above"
        nums["keep_within_node"] = keep
        verdict = (f"above the {penalty_pct:g}% threshold → keep jobs within one node" if keep
                   else f"below the {penalty_pct:g}% threshold → spreading over nodes is fine")
        if is_emulated(r["placement_class"]):
            # a link whose rate we set, not a cluster's network: advice about that link only
            verdict += (" — over this emulated link (one host, its rate set by the study), not advice about a "
                        "real cluster's network")
        out.append(rests_on(guideline(gid, "comm", "advice", f"{head} ({float(r['samples_per_s_mean']):,.0f} vs "
                                      f"{float(r['intra_samples_per_s']):,.0f} samples/s) → {verdict}.", rule, nums),
                            rests))
    return out


def comm_share(table: pd.DataFrame, experiment: str, share_pct: float, d: Decide) -> list[dict]:
    """Points of one experiment (world size > 1) whose exposed communication exceeds share_pct of a step."""
    min_repeats = d.min_repeats
    rule = (f"exposed_comm_pct (synced − no_sync step, as % of the synced step; mean over repeats with {d.label} CI) > "
            f"{share_pct:g}% at a DDP point of the {experiment} experiment with world size > 1")
    gid = f"comm-share-{experiment}"
    t = table[(table["world_size"] > 1) & table["exposed_comm_pct_mean"].notna() & table["ddp"].astype(bool)]
    if t.empty:
        return [guideline(gid, "comm", "not_enough_data", f"{experiment} points with world size > 1 and a measured "
                          f"exposed communication (comm probe enabled, status ok).", rule, {"threshold_pct": share_pct})]
    over, under, unsure = [], [], []
    cited = {}
    for _, r in t.sort_values(["world_size", "nodes"]).iterrows():
        m = float(r["exposed_comm_pct_mean"])
        lo, hi = deciding(r, "exposed_comm_pct")
        where = f"{r['model']} {topo(r)}"
        cited[where] = [rounded(m, 2), rounded(lo, 2), rounded(hi, 2)]
        s = side(m, lo, hi, share_pct)
        txt = f"{topo(r)} {ci_text(m, lo, hi, '{:.1f}%', d.label)}"
        if s == "straddles" or r["n_ok"] < min_repeats:
            unsure.append((txt, (topo(r), more_repeats(int(r["n_ok"]), m, lo, hi, share_pct, min_repeats), key_of(r))))
        elif s == "above":
            over.append(txt)
        else:
            under.append(txt)
    rests = [(f"{r['model']} {topo(r)}", r["n_ok"]) for _, r in t.iterrows()]
    nums = {"threshold_pct": share_pct, "decision_level": d.level, "exposed_comm_pct_mean_ci": cited,
            "num_points_over": len(over),
            "num_points_under": len(under), "num_points_unsure": len(unsure)}
    parts = []
    if over:
        parts.append(f"exposed communication exceeds {share_pct:g}% of a step at {', '.join(over)}: there the "
                     f"all-reduce is not hidden behind the backward pass; grow the per-rank work (batch, width) or "
                     f"expect the efficiency loss shown above")
    if under:
        parts.append(f"it stays below {share_pct:g}% at {', '.join(under)}")
    if unsure:
        parts.append(f"undecided at {', '.join(u[0] for u in unsure)}")
        return [rests_on(guideline(gid, "comm", "inconclusive", f"{experiment}: " + "; ".join(parts) + ".", rule,
                                   nums, settle_text([u[1] for u in unsure]), [u[1] for u in unsure]), rests)]
    return [rests_on(guideline(gid, "comm", "advice", f"{experiment}: " + "; ".join(parts) + ".", rule, nums), rests)]
