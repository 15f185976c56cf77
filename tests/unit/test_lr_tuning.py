"""training.lr: tuned: the one-rank sweep's points in the plan, the rate chosen
from records of known truth (a known best rate, a tie, a best rate at either end, a fixed target
reached soonest, none reached, failed sweep points), and a tuned point taking the chosen rate
without changing its id."""

import copy
import dataclasses
import json

import pytest

import plan
from kan.contract.point import Point, PointError, TrainConfig
from launch import tuned
from scaling.tables.lrtune import choose, sweep_run

CANDS = [0.001, 0.01, 0.1]
CFG = {
    "study": "s",
    "data": {"kind": "sklearn", "name": "breast_cancer"},
    "model": {"impl": ["kanscale", "mlp_matched"], "widths": [30, 8, 2]},
    "training": {"lr": "tuned", "lr_candidates": CANDS, "eval_every_samples": 256},
    "repeats": 2,
    "experiments": {
        "strong": {"samples": 2048, "global_batch": 64, "non_ddp_baseline": False,
                   "topologies": [{"nodes": 1, "gpus_per_node": n} for n in (1, 2)]},
        "allreduce": {"enabled": False},
    },
}


def _points(**training):
    cfg = copy.deepcopy(CFG)
    cfg["training"].update(training)
    return plan.build_points(plan.validate_config(cfg))


def test_the_plan_has_a_one_rank_sweep_per_candidate_and_tuned_scaling_points():
    pts = _points()
    sweep = [p for p in pts.values() if p.experiment == "lr_tune"]
    # 3 candidates x 2 implementations x 2 repeats, one rank each, at strong's global batch of 64
    assert len(sweep) == 12
    assert {(p.placement.world_size, p.train.batch_per_rank, p.train.samples) for p in sweep} == {(1, 64, 2048)}
    assert sorted({p.train.lr for p in sweep}) == CANDS and not any(p.train.tuned for p in sweep)
    assert "lr0p01" in next(p.id for p in sweep if p.train.lr == 0.01)
    strong = [p for p in pts.values() if p.experiment == "strong"]
    assert len(strong) == 8 and all(p.train.lr_tuned_from == tuple(CANDS) for p in strong)
    # a tuned point's rate is unset until the sweep chooses it: no made-up rate to train with
    assert all(p.train.tuned and p.train.lr is None and p.lr_effective is None for p in strong)
    # a list of rates is the same study
    assert set(_points(lr=CANDS)) == set(pts)


def test_a_tuned_point_keeps_its_id_whatever_rate_it_trains_with_and_parses_back():
    p = next(p for p in _points().values() if p.experiment == "strong")
    q = dataclasses.replace(p, train=dataclasses.replace(p.train, lr=0.0123))
    assert q.id == p.id and Point.from_json(q.to_json()).id == p.id
    from kan.train import parse
    back, _ = parse([*q.to_argv(), "--out=x.json"])
    assert back == q and back.id == p.id
    # other candidates are another point
    r = dataclasses.replace(p, train=dataclasses.replace(p.train, lr_tuned_from=(0.001, 0.01)))
    assert r.id != p.id


def test_tuned_is_one_test_and_only_a_tuned_point_has_an_unset_rate():
    assert TrainConfig(lr_tuned_from=(0.01, 0.1)).tuned and not TrainConfig().tuned
    assert TrainConfig(lr=None, lr_tuned_from=(0.01, 0.1)).lr is None
    with pytest.raises(PointError, match=r"training\.lr: is unset; only a tuned point"):
        TrainConfig(lr=None)
    with pytest.raises(PointError, match=r"training\.samples"):  # its other fields are checked all the same
        TrainConfig(lr=None, lr_tuned_from=(0.01,), samples=0)
    pts = _points()
    assert {p.experiment for p in pts.values() if p.train.tuned} == {"strong"}  # neither sweep nor readiness


def test_a_tuned_point_without_its_rate_cannot_be_trained():
    p = next(p for p in _points().values() if p.experiment == "strong")
    with pytest.raises(PointError, match="tuned and its rate unset"):
        p.to_argv()
    q = dataclasses.replace(p, train=dataclasses.replace(p.train, lr=0.01))
    from kan.train import UsageError, parse
    with pytest.raises(UsageError, match="--lr: a tuned point"):  # never the default rate
        parse([a for a in q.to_argv() if not a.startswith("--lr=")] + ["--out=x.json"])


def test_tuned_points_keep_the_ids_they_had_and_old_records_read_back():
    """The id's hash names the grid `lr_candidates`, as before the field was called lr_tuned_from;
    a record written then reads back as the same point."""
    p = _points()["strong-kanscale_bspline-30x8x2-n1g1-r0-95898eb8"]  # the id before the rename
    q = dataclasses.replace(p, train=dataclasses.replace(p.train, lr=0.01))
    old = q.to_json()
    old["train"]["lr_candidates"] = old["train"].pop("lr_tuned_from")
    assert Point.from_json(old) == q and Point.from_json(old).id == p.id


def test_untuned_points_keep_their_ids():
    pts = _points(lr=0.01)
    assert not any(p.experiment == "lr_tune" or p.train.tuned for p in pts.values())
    assert all("lr_tuned_from" not in p.to_json()["train"] for p in pts.values())


def test_tuning_without_held_out_evaluation_is_refused_naming_the_key():
    cfg = copy.deepcopy(CFG)
    cfg["training"]["eval_every_samples"] = 0
    with pytest.raises(plan.ConfigError, match=r"training\.lr: tuned rates are judged on held-out data"):
        plan.validate_config(cfg)


@pytest.mark.parametrize("bad, said", [("fast", "training.lr"), ([0.01], "training.lr"), (-1, "training.lr")])
def test_bad_rates_are_named(bad, said):
    cfg = copy.deepcopy(CFG)
    cfg["training"]["lr"] = bad
    with pytest.raises(plan.ConfigError, match=said):
        plan.validate_config(cfg)


# ---- the choice, on records of known truth ------------------------------------------------------

def _run(key, lr, finals, times=None, metric="val_accuracy", ok=True):
    """A sweep run whose held-out curve ends at finals[-1]; times: train_time_s of each evaluation."""
    times = times or [0.1 * (i + 1) for i in range(len(finals))]
    curve = [{"step": i + 1, "samples_seen": 256 * (i + 1), "train_time_s": t, metric: v,
              "val_loss": (1 - v) if metric == "val_accuracy" else v} for i, (t, v) in enumerate(zip(times, finals))]
    rec = {"point": {"train": {"lr": lr}}, "status": "ok" if ok else "failed", "validation": {"curve": curve},
           "reason": None if ok else "boom"}
    return sweep_run(rec, f"{key} tuning key", key)


def test_the_best_final_metric_wins():
    runs = [_run("kan", lr, [0.5, acc]) for lr, acc in ((0.001, 0.80), (0.01, 0.95), (0.1, 0.90)) for _ in range(2)]
    c = choose(runs, CANDS, {"metric": "val_accuracy", "from_reference": 0.98})["kan"]
    assert c["chosen"] == 0.01 and c["criterion"] == "final_metric" and c["tuning_key"] == "kan tuning key"
    assert [x["repeats"] for x in c["candidates"]] == [2, 2, 2]
    assert "best final val_accuracy 0.95" in c["why"] and "extend" not in c["why"]


def test_a_loss_is_minimised_without_a_target():
    runs = [_run("m", lr, [1.0, loss], metric="val_loss") for lr, loss in ((0.001, 0.3), (0.01, 0.1), (0.1, 0.2))]
    assert choose(runs, CANDS, None)["m"]["chosen"] == 0.01


def test_a_tie_goes_to_the_lower_val_loss_then_the_smaller_rate():
    def run(lr, acc, loss):
        r = _run("kan", lr, [acc])
        r["curve"][-1]["val_loss"] = loss
        return r
    c = choose([run(0.001, 0.9, 0.3), run(0.01, 0.95, 0.2), run(0.1, 0.95, 0.1)], CANDS,
               {"metric": "val_accuracy", "from_reference": 0.98})["kan"]
    assert c["chosen"] == 0.1 and "a tie, broken by val_loss" in c["why"]
    c = choose([_run("m", lr, [0.2], metric="val_loss") for lr in CANDS], CANDS, None)["m"]
    assert c["chosen"] == 0.001  # all equal: the smallest rate


@pytest.mark.parametrize("best, says", [(0.1, "largest tried: extend lr_candidates upward"),
                                         (0.001, "smallest tried: extend lr_candidates downward")])
def test_a_best_rate_at_an_end_of_the_list_says_so(best, says):
    runs = [_run("kan", lr, [0.9 + (0.05 if lr == best else 0)]) for lr in CANDS]
    c = choose(runs, CANDS, {"metric": "val_accuracy", "from_reference": 0.98})["kan"]
    assert c["chosen"] == best and says in c["why"]


def test_a_fixed_target_goes_to_the_rate_that_reaches_it_soonest():
    # 0.1 ends best but reaches 0.9 late; 0.01 reaches it at 0.2 s in both repeats; 0.001 never
    runs = [_run("kan", 0.1, [0.5, 0.6, 0.99], [0.1, 0.2, 0.3]) for _ in range(2)]
    runs += [_run("kan", 0.01, [0.5, 0.92, 0.93], [0.1, 0.2, 0.3]) for _ in range(2)]
    runs += [_run("kan", 0.001, [0.5, 0.6, 0.7]) for _ in range(2)]
    c = choose(runs, CANDS, {"metric": "val_accuracy", "value": 0.9})["kan"]
    assert c["chosen"] == 0.01 and c["criterion"] == "time_to_target"
    by = {x["lr"]: x for x in c["candidates"]}
    assert by[0.01]["time_to_target_s"] == pytest.approx(0.2) and by[0.1]["time_to_target_s"] == pytest.approx(0.3)
    assert by[0.001]["time_to_target_s"] is None and by[0.001]["reached"] == 0
    assert "0.001 did not reach it in every repeat" in c["why"]


def test_a_rate_reaching_the_target_in_only_some_repeats_is_not_chosen_by_time():
    runs = [_run("kan", 0.01, [0.95], [0.05]), _run("kan", 0.01, [0.5], [0.05]),  # 1 of 2
            _run("kan", 0.1, [0.95], [0.3]), _run("kan", 0.1, [0.95], [0.3])]
    c = choose(runs, CANDS, {"metric": "val_accuracy", "value": 0.9})["kan"]
    assert c["chosen"] == 0.1 and c["candidates"][1]["reached"] == 1


def test_no_rate_reaching_the_target_falls_back_to_the_best_final_value_and_says_so():
    runs = [_run("kan", lr, [0.5, acc]) for lr, acc in ((0.001, 0.6), (0.01, 0.8), (0.1, 0.7))]
    c = choose(runs, CANDS, {"metric": "val_accuracy", "value": 0.99})["kan"]
    assert c["chosen"] == 0.01 and c["why"].startswith("no rate reached val_accuracy 0.99 in every repeat")


def test_failed_sweep_points_are_counted_and_all_failed_chooses_nothing():
    runs = [_run("kan", 0.01, [0.9]), _run("kan", 0.01, [0.9], ok=False), _run("kan", 0.1, [0.95], ok=False)]
    c = choose(runs, CANDS, None)["kan"]
    assert c["chosen"] == 0.01 and [x["failed"] for x in c["candidates"]] == [0, 1, 1]
    c = choose([_run("kan", 0.1, [0.9], ok=False)], CANDS, None)["kan"]
    assert c["chosen"] is None and "no candidate has an ok sweep point" in c["why"]


# ---- the launcher's side ------------------------------------------------------------------------

def test_the_launcher_gives_a_tuned_point_its_chosen_rate_or_a_clear_reason(tmp_path):
    p = next(p for p in _points().values() if p.experiment == "strong" and p.model.impl == "kanscale")
    path = tmp_path / "lr_tuning.json"
    with pytest.raises(tuned.TuningError, match="the lr sweep has not run"):
        tuned.resolve(p, path)
    # the file names each choice by its sweep model's display name and keeps the key inside: a point
    # of another width (model_size) finds the same choice
    entry = {"chosen": 0.01, "why": "best", "candidates": [{"lr": c} for c in CANDS],
             "tuning_key": p.tuning_key}
    other = {**entry, "chosen": 0.1, "tuning_key": "mlp_matched on sklearn breast_cancer"}
    name = "kan-bspline [30,8,2] on sklearn breast_cancer"
    path.write_text(json.dumps({"mlp_matched [30,8,2] on sklearn breast_cancer": other, name: entry}))
    wider = dataclasses.replace(p, model=dataclasses.replace(p.model, widths=(30, 64, 2)))
    for point in (p, wider):
        q = tuned.resolve(point, path)
        assert q.train.lr == 0.01 and q.id == point.id
    # a file written when the choices were keyed by the tuning key
    path.write_text(json.dumps({p.tuning_key: {k: v for k, v in entry.items() if k != "tuning_key"}}))
    assert tuned.resolve(p, path).train.lr == 0.01
    path.write_text(json.dumps({name: {**entry, "chosen": None, "why": "all failed"}}))
    with pytest.raises(tuned.TuningError, match="chose no rate for kanscale_bspline on sklearn breast_cancer: all failed"):
        tuned.resolve(p, path)
    assert tuned.why_unset(p, path).endswith("chose no rate for kanscale_bspline on sklearn breast_cancer: all failed")
    path.write_text(json.dumps({name: {**entry, "candidates": [{"lr": 0.5}, {"lr": 0.6}]}}))
    with pytest.raises(tuned.TuningError, match="run the workflow again"):
        tuned.resolve(p, path)
    untuned = next(p for p in _points(lr=0.01).values())
    assert tuned.resolve(untuned, path) == untuned
