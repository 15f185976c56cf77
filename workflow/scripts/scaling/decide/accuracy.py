"""The verdict of a study with a held-out target (report.target): which world size gets each model to
the target soonest, and how the KAN does against its MLP baselines at that one target.

Time to target is training time to the first held-out evaluation at or past the target (the strong
and weak tables' time_to_target_s, tables/heldout.py); a configuration counts only when every ok
repeat reached it (a mean over the lucky repeats would be biased low). Per experiment and model:
- the soonest world size is decided when, against every other world size that reached the target,
  the deciding interval of time(other) / time(soonest) lies above 1, and each has at least
  report.min_repeats ok repeats; otherwise inconclusive, with the repeats that would settle it;
- world sizes that did not reach the target in every repeat are named: more ranks at a fixed
  number of samples can train a worse model (the seed paper's 8-GPU run ended 220x worse);
- only measured world sizes are compared: a soonest at the largest one measured says so.
KAN against MLP (models whose implementation is mlp or mlp_matched), per experiment: the ratio of
their least times to the one target, each at its own soonest world size and the rate it trained
with (its tuned rate where training.lr is tuned); decided when its deciding interval excludes 1.
"""

from __future__ import annotations

import math

import pandas as pd

from ..common.columns import REAL_PLACEMENTS, model_family
from ..common.fmt import seconds
from ..common.stats import known, ratio_of, t_quantile
from .rules import Decide, guideline, key_of, more_repeats, rests_on, rounded, settle_text, side, topo
from .totarget import predicted_guideline

EXPERIMENTS = ("strong", "weak")
NEEDS = ("target_value", "target_reached", "time_to_target_s", "time_to_target_s_std", "target_n_repeats")
TRAIN_LOSS = "train_loss"  # the metric of a training-loss target (training_loss_view)


def is_baseline(model: str) -> bool:
    return model_family(model).startswith("mlp")


def _summary(r) -> dict:
    return {"n": int(r["target_n_repeats"]), "mean": float(r["time_to_target_s"]),
            "std": float(r["time_to_target_s_std"]) if known(r["time_to_target_s_std"]) else math.nan}


def _where(r) -> str:
    return f"{int(r['world_size'])} rank{'s' if int(r['world_size']) > 1 else ''} ({topo(r)})"


def _ratio_text(x: dict, label: str) -> str:
    band = f" [{label} CI {x['ci_lo']:.2f}, {x['ci_hi']:.2f}]" if known(x["ci_lo"]) else " [no CI: one repeat]"
    return f"{x['ratio']:.2f}×{band}"


def _goal(t: pd.DataFrame) -> str:
    metric = str(t["target_metric"].dropna().iloc[0]) if t["target_metric"].notna().any() else "held-out metric"
    if metric == TRAIN_LOSS:
        return (f"training loss ≤ {float(t['target_value'].dropna().iloc[0]):.4g} (report.target_loss; training loss: "
                f"the runs have no held-out set)")
    way = "≤" if metric == "val_loss" else "≥"
    return f"{metric} {way} {float(t['target_value'].dropna().iloc[0]):.4g}"


def _candidates(t: pd.DataFrame, model: str) -> tuple[pd.DataFrame, list[str]]:
    """(the model's DDP rows at real placements that reached the target in every repeat, sorted by
    mean time; what else was measured and why it does not count)."""
    # on a training-loss target a one-rank run without DDP trains the same model and counts too
    plain = (t["target_metric"] == TRAIN_LOSS) & ~t["ddp"].astype(bool) & (t["world_size"] == 1)
    g = t[(t["model"] == model) & (t["ddp"].astype(bool) | plain) & t["placement_class"].isin(REAL_PLACEMENTS)]
    reached = g[(g["target_reached"] == True) & g["time_to_target_s"].notna()]  # noqa: E712 (object column)
    left = [f"{_where(r)}: {r['time_to_target_note'] or 'no held-out curve'}" for _, r in g.iterrows()
            if r.name not in reached.index and int(r["n_ok"])]
    left += [f"{_where(r)}: {r['placement_class']}, not compared" for _, r in t[
        (t["model"] == model) & t["ddp"].astype(bool) & ~t["placement_class"].isin(REAL_PLACEMENTS)].iterrows()]
    return reached.sort_values(["time_to_target_s", "world_size"]), left


def soonest(t: pd.DataFrame, exp: str, model: str, d: Decide) -> tuple[dict, pd.Series | None]:
    """The soonest-world-size guideline of one model, and its soonest row (None: nothing reached)."""
    gid = f"time-to-accuracy-{exp}-{model}"
    rule = (f"{exp} experiment, DDP points at real placements: the world size with the least mean training time "
            f"to the held-out target (every ok repeat reached it); advice when time(other) / time(soonest) has its "
            f"{d.label} interval above 1 for every other world size that reached it, each with >= {d.min_repeats} "
            f"ok repeats")
    reached, left = _candidates(t, model)
    if reached.empty:
        return guideline(gid, "time-to-accuracy", "not_enough_data",
                         f"{exp}, {model}: a world size whose every repeat reached the held-out target"
                         f"{' (' + '; '.join(left) + ')' if left else ''}.", rule, {"not_counted": left}), None
    best = reached.iloc[0]
    nums = {"target": _goal(t), "soonest": {"world_size": int(best["world_size"]), "placement": topo(best),
                                           "time_to_target_s": rounded(best["time_to_target_s"], 6),
                                           "ci": [rounded(best["time_to_target_s_ci_lo"], 6),
                                                  rounded(best["time_to_target_s_ci_hi"], 6)]},
            "others": [], "not_counted": left, "decision_level": d.level}
    unsure, parts = [], []
    for _, r in reached.iloc[1:].iterrows():
        x = ratio_of(_summary(r), _summary(best), d.level)
        s = side(x["ratio"], x["ci_lo"], x["ci_hi"], 1.0)
        nums["others"].append({"world_size": int(r["world_size"]), "placement": topo(r),
                               "ratio": rounded(x["ratio"]), "ci": [rounded(x["ci_lo"]), rounded(x["ci_hi"])],
                               "decided": s == "above"})
        parts.append(f"{_where(r)} takes {_ratio_text(x, d.label)} as long")
        if s != "above":
            n = min(int(r["target_n_repeats"]), int(best["target_n_repeats"]))
            k = more_repeats(n, x["ratio"], x["ci_lo"], x["ci_hi"], 1.0, d.min_repeats)
            # both ends of the ratio need the repeats; settle_text names each place once
            unsure += [(_where(r), k, key_of(r)), (_where(best), k, key_of(best))]
    for _, r in reached.iterrows():
        if int(r["n_ok"]) < d.min_repeats and not any(key_of(r) == k for *_, k in unsure):
            unsure.append((_where(r), d.min_repeats - int(r["n_ok"]), key_of(r)))
    t_txt = seconds(best["time_to_target_s"], best["time_to_target_s_ci_lo"], best["time_to_target_s_ci_hi"], "95%")
    text = f"{exp}, {model}, to {_goal(t)}: {_where(best)} is soonest, {t_txt} of training"
    text += ("; " + "; ".join(parts)) if parts else "; no other world size reached it to compare"
    if int(best["world_size"]) == int(t.loc[t["model"] == model, "world_size"].max()):
        text += "; the largest world size measured: larger ones may be sooner still (measure them)"
    if left:
        text += ". Not counted: " + "; ".join(left)
    text += "."
    g = (guideline(gid, "time-to-accuracy", "inconclusive", text, rule, nums, settle_text(unsure), unsure) if unsure
         else guideline(gid, "time-to-accuracy", "advice", text, rule, nums))
    return rests_on(g, [(_where(r), r["n_ok"]) for _, r in reached.iterrows()]), best


def kan_vs_mlp(exp: str, kan: str, mlp: str, a, b, goal: str, d: Decide) -> dict:
    """The KAN's least time to the target against the MLP's, each at its own soonest world size."""
    gid = f"time-to-accuracy-{exp}-{kan}-vs-{mlp}"
    rule = (f"{exp} experiment: time(KAN at its soonest world size) / time(MLP at its soonest world size) to the one "
            f"held-out target; advice when its {d.label} interval lies on one side of 1")
    if not math.isclose(float(a["target_value"]), float(b["target_value"]), rel_tol=1e-9):
        return guideline(gid, "time-to-accuracy", "not_enough_data", f"{exp}: {kan} and {mlp} at one target (theirs "
                         f"differ: {float(a['target_value']):.4g} and {float(b['target_value']):.4g}).", rule, {})
    x = ratio_of(_summary(a), _summary(b), d.level)
    s = side(x["ratio"], x["ci_lo"], x["ci_hi"], 1.0)
    way = "slower than" if x["ratio"] >= 1 else "sooner than"
    shown = x if x["ratio"] >= 1 else {"ratio": 1 / x["ratio"], "ci_lo": 1 / x["ci_hi"] if known(x["ci_hi"]) else
                                       math.nan, "ci_hi": 1 / x["ci_lo"] if known(x["ci_lo"]) else math.nan}
    text = (f"{exp}, for {goal}: {kan} at {_where(a)} reaches it {_ratio_text(shown, d.label)} {way} {mlp} at "
            f"{_where(b)}, each at its soonest world size and its own rate")
    nums = {"target": goal, "ratio_kan_over_mlp": rounded(x["ratio"]), "ci": [rounded(x["ci_lo"]), rounded(x["ci_hi"])],
            "kan": {"world_size": int(a["world_size"]), "time_to_target_s": rounded(a["time_to_target_s"], 6)},
            "mlp": {"world_size": int(b["world_size"]), "time_to_target_s": rounded(b["time_to_target_s"], 6)},
            "decision_level": d.level}
    if s == "straddles":
        n = min(int(a["target_n_repeats"]), int(b["target_n_repeats"]))
        k = more_repeats(n, x["ratio"], x["ci_lo"], x["ci_hi"], 1.0, d.min_repeats)
        targets = [(_where(a) + f" of {kan}", k, key_of(a)), (_where(b) + f" of {mlp}", k, key_of(b))]
        g = guideline(gid, "time-to-accuracy", "inconclusive", text + ".", rule, nums, settle_text(targets), targets)
    else:
        g = guideline(gid, "time-to-accuracy", "advice", text + ".", rule, nums)
    return rests_on(g, [(f"{_where(a)} of {kan}", a["n_ok"]), (f"{_where(b)} of {mlp}", b["n_ok"])])


def training_loss_view(t: pd.DataFrame) -> pd.DataFrame | None:
    """The strong or weak table on its fixed training-loss target (report.target_loss) in the held-out
    target's columns, for a study without a held-out set (runs imported from elsewhere): a point
    reached it when time_to_target_s is known (tables/experiments.py gives it only when every ok
    repeat with a curve reached it); None without such a target."""
    if "target_loss" not in t or not t["target_loss"].notna().any() or "time_to_target_s" not in t:
        return None
    t = t.copy()
    # the standard deviation over repeats back from the 95% CI's upper half-width (the lower end is
    # clamped at 0): half = t_(0.975, n - 1) x std / sqrt(n); NaN with one repeat
    n = t["n_ok"].astype(float)
    tq = [t_quantile(0.95, int(k) - 1) if k >= 2 else math.nan for k in n]
    std = (t.get("time_to_target_s_ci_hi", math.nan) - t["time_to_target_s"]) * n ** 0.5 / pd.Series(tq, index=t.index)
    return t.assign(target_metric=TRAIN_LOSS, target_value=t["target_loss"],
                    target_reached=t["time_to_target_s"].notna(), target_n_repeats=t["n_ok"],
                    time_to_target_s_std=std)


def time_to_accuracy(tables: dict, d: Decide, model_json: dict | None = None,
                     critical: dict | None = None, training_target: bool = False) -> list[dict]:
    """Every time-to-accuracy guideline: none without a held-out target in the strong or weak table
    (or, with `training_target`, report.target_loss, on training loss: training_loss_view); with the
    performance model, time to target predicted past what was measured (decide/totarget.py; the weak
    experiment's with `critical` = critical_batch.json, None: no batch experiment)."""
    out = []
    for exp in EXPERIMENTS:
        t = tables.get(exp)
        if t is None:
            continue
        if not set(NEEDS) <= set(t.columns) or not t["target_value"].notna().any():
            t = training_loss_view(t) if training_target else None
            if t is None:
                continue
        t = t.copy()
        t["ddp"] = t["ddp"].fillna(True).astype(bool) if "ddp" in t else True
        bests = {}
        for model in sorted(t["model"].unique()):
            g, best = soonest(t, exp, model, d)
            out.append(g)
            p = predicted_guideline(exp, model, _candidates(t, model)[0], best, model_json, critical)
            if p is not None:
                out.append(rests_on(p, [(x["where"], x["n_ok"]) for x in g.get("rests_on", [])]))
            if best is not None:
                bests[model] = best
        for kan in sorted(m for m in bests if not is_baseline(m)):
            for mlp in sorted(m for m in bests if is_baseline(m)):
                out.append(kan_vs_mlp(exp, kan, mlp, bests[kan], bests[mlp], _goal(t), d))
    return out
