"""The guideline of the ddp experiment: which of DDP's own settings to deploy at the measured
placement, judged by time to the target loss, not by step time (a faster step that converges
worse is not faster).

Against the `none` setting (DDP's defaults) at the same model, placement and link, a setting
- qualifies when the deciding interval of its time-to-target ratio lies below 1 (faster to the
  target) and that of its final-loss ratio lies below 1 + tolerance (converges as well, within
  report.ddp_loss_tolerance_pct);
- is ruled out when either interval lies on the wrong side (ratio's interval at or above 1, or
  final loss above the tolerance), when some of its repeats never reached the target, or when it
  could not run on this backend (a failed point: its reason is cited);
- is undecided otherwise, or with fewer than report.min_repeats ok repeats (so is everything, when
  the baseline has too few).
Advice: the qualifying setting with the least mean time to target, when no undecided setting has a
lower mean (it might win); "keep DDP's defaults" when every other setting is ruled out. Otherwise
inconclusive, with the repeats that would settle it. The order among several qualifying settings is
by their means (stated as such).
"""

from __future__ import annotations

import math

import pandas as pd

from ..common.columns import DEFAULT_DDP_SETTING, SIMULATED, is_emulated
from ..common.stats import known
from ..tables.aggregate import LOG_PATH
from .rules import Decide, deciding, guideline, key_of, more_repeats, rests_on, rounded, settle_text, side, topo


def _fmt(v, lo, hi, label: str) -> str:
    if not known(v):
        return "–"
    if lo is None or hi is None or math.isnan(lo) or math.isnan(hi):
        return f"{v:.2f}× [no interval]"
    return f"{v:.2f}× [{label} CI {lo:.2f}, {hi:.2f}]"


def _prediction(model_json: dict | None, model: str, r) -> dict | None:
    """The performance model's step-time prediction for this setting (model.json ddp_settings)."""
    for e in ((model_json or {}).get("ddp_settings") or {}).get(model, []):
        if e.get("ddp_setting") == r["ddp_setting"] and int(e.get("nodes", -1)) == int(r["nodes"]) and \
                int(e.get("gpus_per_node", -1)) == int(r["gpus_per_node"]) and \
                float(e.get("link_mbit") or 0) == float(r["link_mbit"] or 0):
            return e
    return None


def judge(r, tol: float, min_repeats: int) -> tuple[str, str, int | None]:
    """(verdict: 'qualifies' | 'ruled out' | 'undecided', why, more repeats it needs or None)."""
    if int(r["n_ok"]) == 0:
        why = r.get("not_ok")
        # the table's reasons, each once (tables/aggregate.py not_ok_text); the guideline cites them without log paths
        why = LOG_PATH.sub("", why) if isinstance(why, str) and why else "no ok repeat"
        return "ruled out", f"could not run here ({why})", None
    note = str(r.get("time_to_target_note") or "")
    if note.startswith("not reached"):
        return "ruled out", f"did not reach the target loss ({note})", None
    loss, (llo, lhi) = r["final_loss_ratio"], deciding(r, "final_loss_ratio")
    ttt, (tlo, thi) = r["ttt_ratio"], deciding(r, "ttt_ratio")
    ls, ts = side(loss, llo, lhi, 1 + tol), side(ttt, tlo, thi, 1.0)
    if ls == "above":
        return "ruled out", f"final loss above the {100 * tol:g}% tolerance", None
    if ts == "above":
        return "ruled out", "not faster to the target", None
    need = []
    if ls == "straddles":
        need.append(more_repeats(int(r["n_ok"]), loss, llo, lhi, 1 + tol, min_repeats))
    if ts == "straddles":
        need.append(more_repeats(int(r["n_ok"]), ttt, tlo, thi, 1.0, min_repeats) if not math.isnan(ttt) else
                    max(min_repeats - int(r["n_ok"]), 1))
    if int(r["n_ok"]) < min_repeats:
        need.append(min_repeats - int(r["n_ok"]))
    if need:
        why = " and ".join(w for w, s in (("final loss vs the tolerance", ls), ("time to target vs none", ts))
                           if s == "straddles") or f"fewer than {min_repeats} ok repeats"
        more = None if any(k is None for k in need) else max(need)
        return "undecided", f"{why} not decided", more
    return "qualifies", "faster to the target, final loss within the tolerance", None


def ddp_setting_guidelines(ddp: pd.DataFrame, tol_pct: float, d: Decide, model_json: dict | None = None) -> list[dict]:
    """One guideline per model and placement of the ddp experiment (none when it did not run)."""
    tol = tol_pct / 100
    rule = (f"per DDP setting at one placement: time to the target loss ÷ that of `none` (DDP's defaults) and final "
            f"training loss ÷ that of `none`; a setting qualifies when the {d.label} interval of the first lies below "
            f"1 and that of the second below {1 + tol:g} (report.ddp_loss_tolerance_pct = {tol_pct:g}); advice: the "
            f"qualifying setting with the least mean time to target, or DDP's defaults when every other setting is "
            f"ruled out; each setting and `none` need ≥ {d.min_repeats} ok repeats")
    if ddp is None or ddp.empty or "ddp_setting" not in ddp:
        return []
    out = []
    for (model, nodes, gpn, link), g in ddp.groupby(["model", "nodes", "gpus_per_node", "link_mbit"], sort=True):
        base_rows = g[(g["ddp_setting"] == DEFAULT_DDP_SETTING) & (g["n_ok"] > 0)]
        first = g.iloc[0]
        where = topo(first)
        gid = f"ddp-settings-{model}-{int(nodes)}x{int(gpn)}" + (f"-{float(link):g}mbit" if float(link or 0) else "")
        head = f"{model} at {where}"
        if base_rows.empty:
            out.append(guideline(gid, "ddp", "not_enough_data",
                                 f"{head}: the `none` setting (DDP's defaults) with an ok repeat; every other setting "
                                 f"is judged against it.", rule, {"tolerance_pct": tol_pct}))
            continue
        base = base_rows.iloc[0]
        if math.isnan(float(base["time_to_target_s_mean"])):
            out.append(guideline(gid, "ddp", "not_enough_data",
                                 f"{head}: `none` has no time to target ({base.get('time_to_target_note') or 'no target'}); "
                                 f"set report.target_loss to a loss it reaches, or train longer.", rule,
                                 {"tolerance_pct": tol_pct}))
            continue
        others = g[g["ddp_setting"] != DEFAULT_DDP_SETTING]
        if others.empty:
            out.append(guideline(gid, "ddp", "not_enough_data", f"{head}: a DDP setting besides `none` (comm_hook, "
                                 f"bucket_cap_mb, static_graph or gradient_as_bucket_view in experiments.ddp).", rule,
                                 {"tolerance_pct": tol_pct}))
            continue
        verdicts = {r["ddp_setting"]: (r, *judge(r, tol, d.min_repeats)) for _, r in others.iterrows()}
        nums = {"tolerance_pct": tol_pct, "decision_level": d.level, "target_loss": rounded(base.get("target_loss")),
                "baseline_time_to_target_s": rounded(base["time_to_target_s_mean"], 3),
                "baseline_n_ok": int(base["n_ok"])}
        settings = [DEFAULT_DDP_SETTING] + list(verdicts)

        def per(fn):
            return {s: fn(base if s == DEFAULT_DDP_SETTING else verdicts[s][0], s) for s in settings}

        def ratio_cell(r, s, name):
            """1 at the baseline (by definition), the ratio with its deciding interval, or None (unknown)."""
            if s == DEFAULT_DDP_SETTING:
                return 1.0
            if rounded(r[name]) is None:
                return None
            return [rounded(r[name], 3), *(rounded(x, 3) for x in deciding(r, name))]

        nums["time_to_target_ratio_by_setting"] = per(lambda r, s: ratio_cell(r, s, "ttt_ratio"))
        nums["final_loss_ratio_by_setting"] = per(lambda r, s: ratio_cell(r, s, "final_loss_ratio"))
        nums["step_time_ratio_by_setting"] = per(lambda r, s: 1.0 if s == DEFAULT_DDP_SETTING else rounded(r["step_ratio"], 3))
        nums["bytes_per_step_ratio_by_setting"] = per(lambda r, s: 1.0 if s == DEFAULT_DDP_SETTING else rounded(r["bytes_ratio"], 4))
        nums["n_ok_by_setting"] = per(lambda r, s: int(r["n_ok"]))
        nums["verdict_by_setting"] = per(lambda r, s: "baseline" if s == DEFAULT_DDP_SETTING else verdicts[s][1])
        qualify = sorted((v for v in verdicts.values() if v[1] == "qualifies"), key=lambda v: float(v[0]["ttt_ratio"]))
        best = qualify[0] if qualify else None
        rivals = [v for v in verdicts.values() if v[1] == "undecided" and
                  (best is None or math.isnan(float(v[0]["ttt_ratio"])) or float(v[0]["ttt_ratio"]) < float(best[0]["ttt_ratio"]))]
        unsure = [(f"{v[0]['ddp_setting']} at {where}", v[3], key_of(v[0])) for v in rivals]
        base_short = int(base["n_ok"]) < d.min_repeats
        if rivals or base_short:
            # a ratio's interval holds the baseline's spread too: it needs the most any setting needs
            more = max([d.min_repeats - int(base["n_ok"])] + [k for _, k, _ in unsure if k is not None])
            if more > 0:
                unsure.append((f"none at {where} (the baseline)", more, key_of(base)))
        ruled = [f"{s} ({v[2]})" for s, v in verdicts.items() if v[1] == "ruled out"]
        listing = "; ".join(f"{s}: time to target {_fmt(v[0]['ttt_ratio'], *deciding(v[0], 'ttt_ratio'), d.label)}, "
                            f"final loss {_fmt(v[0]['final_loss_ratio'], *deciding(v[0], 'final_loss_ratio'), d.label)}"
                            for s, v in verdicts.items() if v[0]["n_ok"] > 0)
        link_note = ""
        if is_emulated(first.get("placement_class")):
            link_note = " — over this emulated link (one host, its rate set by the study), not a real cluster's network"
        elif first.get("placement_class") == SIMULATED:
            link_note = " — its 'nodes' shared one host over loopback"
        rests = [(f"{s} at {where}", (base if s == DEFAULT_DDP_SETTING else verdicts[s][0])["n_ok"]) for s in settings]
        if unsure:
            text = (f"{head}, each against `none` (time to target {nums['baseline_time_to_target_s']} s): {listing} — "
                    f"the data do not decide which setting reaches the target fastest within a {tol_pct:g}% loss "
                    f"tolerance{link_note}.")
            out.append(rests_on(guideline(gid, "ddp", "inconclusive", text, rule, nums, settle_text(unsure), unsure),
                                rests))
            continue
        if best is None:
            text = (f"{head}: keep DDP's defaults (`none`): no other setting reaches the target loss faster within a "
                    f"{tol_pct:g}% final-loss tolerance — ruled out: {'; '.join(ruled)}{link_note}.")
            nums["recommended"] = DEFAULT_DDP_SETTING
        else:
            r = best[0]
            nums["recommended"] = r["ddp_setting"]
            pred = _prediction(model_json, model, r)
            model_txt = ""
            if pred and pred.get("error_pct") is not None:  # a prediction, and a measured step to check it
                nums["model_step_time_s"] = rounded(pred["predicted_step_time_s"], 5)
                nums["model_error_pct"] = rounded(pred["error_pct"], 1)
                model_txt = (f"; the performance model, with its bytes per step ({pred['bytes_factor']:.3g}× of none), "
                             f"predicts a step of {1e3 * pred['predicted_step_time_s']:.2f} ms "
                             f"({pred['error_pct']:+.0f}% vs measured)")
            also = [v[0]["ddp_setting"] for v in qualify[1:]]
            text = (f"{head}: use {r['ddp_setting']}: time to target "
                    f"{_fmt(r['ttt_ratio'], *deciding(r, 'ttt_ratio'), d.label)} of `none`, final loss "
                    f"{_fmt(r['final_loss_ratio'], *deciding(r, 'final_loss_ratio'), d.label)} (within {tol_pct:g}%), "
                    f"step time {float(r['step_ratio']):.2f}×, {float(r['bytes_ratio']):.3g}× the bytes per step"
                    f"{model_txt}" + (f"; also faster within the tolerance: {', '.join(also)} (ordered by their means)"
                                      if also else "") + (f"; ruled out: {'; '.join(ruled)}" if ruled else "")
                    + f"{link_note}.")
        out.append(rests_on(guideline(gid, "ddp", "advice", text, rule, nums), rests))
    return out
