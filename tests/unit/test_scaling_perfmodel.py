"""The performance model on synthetic data from known compute and alpha-beta terms (no timing
thresholds: the inputs are made-up numbers, only the arithmetic is checked)."""

import json

import numpy as np
import pandas as pd
import pytest
from scaling.common.columns import clean, clean_allreduce
from scaling.common.io import json_safe
from scaling.model.perf_model import fit_performance_model
from scaling.model.fit import fit_all, fit_comm, fit_sweep, training_rows, validate
from scaling.model.terms import corun_curve, corun_factor, ring
from scaling_data import allreduce_sweep, frame, row, settings

ALPHA, BETA = 2e-5, 1e-9  # 20 us per message, 1 GB/s


def point(p, rep, b, step, nosync, exposed, params=5377, experiment="strong", nodes=1, num_hosts=None):
    r = row(experiment, nodes, p // nodes, rep, samples_per_s=b * p / step, batch_per_rank=b, num_params=params,
            num_hosts=num_hosts)
    r.update(step_time_s=step, nosync_step_time_s=nosync, exposed_comm_s=exposed, grads_bytes=4 * params)
    return r


def synthetic(exposure=0.5, noise=0.01, seed=1, sizes=(1, 2, 4, 8), reps=3, global_batch=1024):
    """Strong scaling at a fixed global batch: compute = 1 ms + 2 us * b, exposed = exposure * ring."""
    rng = np.random.default_rng(seed)
    rows = []
    n = 4 * 5377
    for p in sizes:
        b = global_batch // p
        for rep in range(reps):
            comp = (1e-3 + 2e-6 * b) * (1 + noise * rng.standard_normal())
            exposed = exposure * float(ring(p, n, ALPHA, BETA)) + 1e-6 * rng.standard_normal()
            rows.append(point(p, rep, b, comp + exposed, comp, exposed))
    return clean(frame(rows))


def sweep(noise=0.02, seed=2):
    rng = np.random.default_rng(seed)
    topo = ((1, 2, "intra-node"), (1, 4, "intra-node"), (1, 8, "intra-node"))
    return clean_allreduce(allreduce_sweep(ALPHA, BETA, topo, tuple(4096 * 4 ** k for k in range(8)), reps=2,
                                           noise=lambda rep, n: noise * rng.standard_normal()))


def test_alpha_beta_recovered_from_a_noisy_sweep():
    # 2% noise on every time: alpha within 5%, beta within 2%
    (alpha, beta), bound = fit_sweep(sweep())
    assert alpha == pytest.approx(ALPHA, rel=0.05) and beta == pytest.approx(BETA, rel=0.02)
    assert bound == [False, False]


def test_compute_and_exposure_recovered():
    fit = fit_all(training_rows(synthetic()), sweep())
    comp = fit["compute"]["kan-bspline"]
    assert comp["terms"] == ["c0_s", "per_sample_s"]  # one parameter count: no per-parameter term
    assert comp["x"][0] == pytest.approx(1e-3, rel=0.1) and comp["x"][1] == pytest.approx(2e-6, rel=0.05)
    comm = fit["comm"]["intra-node"]
    assert comm["exposure"] == pytest.approx(0.5, rel=0.05) and not comm["exposure_assumed"]


def test_alpha_beta_from_exposed_comm_alone():
    # no sweep: exposed = ring (exposure 1) at three world sizes > 1 separates alpha from beta
    comm = fit_comm("intra-node", training_rows(synthetic(exposure=1.0, noise=0.0)), clean_allreduce(None))
    assert comm["alpha_s"] == pytest.approx(ALPHA, rel=0.05) and comm["beta_s_per_byte"] == pytest.approx(BETA, rel=0.1)
    assert "no sweep" in comm["source"]


def test_one_world_size_and_no_sweep_cannot_separate_alpha_beta():
    fit = fit_all(training_rows(synthetic(sizes=(1, 2))), clean_allreduce(None))
    assert "cannot separate alpha from beta" in fit["comm"]["intra-node"]


def test_loo_mape_on_a_hand_checkable_case():
    # fixed global batch 4: p = 1 runs b = 4, p = 2 runs b = 2; one parameter count and 100 gradient bytes.
    # Sweep only at p = 4 (alpha 0.05 s, beta 1e-3 s/byte): ring(2, 100) = 2 * 0.05 + 100 * 1e-3 = 0.2 s.
    df = clean(frame([point(1, 0, 4, step=2.5, nosync=2.4, exposed=0.1, params=25),
                      point(2, 0, 2, step=1.75, nosync=1.0, exposed=0.75, params=25)]))
    ar = clean_allreduce(allreduce_sweep(0.05, 1e-3, ((1, 4, "intra-node"),), (1000, 10000), reps=1))
    v = validate(training_rows(df), ar, "kan-bspline [2,64,1]", "intra-node")
    # without p = 1: compute = k * b with k = 1.0 / 2 (one batch: proportional), so p = 1 -> 0.5 * 4 = 2.0 s
    #   vs 2.5 s measured: -20%;
    # without p = 2: k = 2.4 / 4 = 0.6, compute(2) = 1.2 s, no p > 1 training point -> exposure 1 assumed,
    #   step = 1.2 + 0.2 = 1.4 s vs 1.75 s measured: -20%.  MAPE = (20 + 20) / 2 = 20%
    per_p = {e["world_size"]: e["error_pct"] for e in v["per_world_size"]}
    assert per_p[1] == pytest.approx(-20.0, abs=1e-6) and per_p[2] == pytest.approx(-20.0, abs=1e-6)
    assert v["loo_mape_pct"] == pytest.approx(20.0, abs=1e-6) and v["world_sizes_validated"] == [1, 2]


def test_validation_says_why_when_no_world_size_above_one_can_be_held_out():
    df = synthetic(sizes=(1, 2))
    v = validate(training_rows(df), sweep()[lambda a: a["world_size"] == 2], "kan-bspline [2,64,1]", "intra-node")
    assert v["loo_mape_pct"] is None and "communication term is untested" in v["reason"]
    assert any("reason" in e and e["world_size"] == 2 for e in v["per_world_size"])


def test_model_json_predicts_validates_and_recommends():
    th = settings(bootstrap_samples=30, predict_max_factor=8, max_gpus_per_node=64, efficiency_threshold=0.5)
    m = fit_performance_model(synthetic(), sweep(), th)
    json.dumps(json_safe(m), allow_nan=False)  # model.json is valid JSON
    one = m["models"]["kan-bspline [2,64,1]"]
    assert one["work"] == {"samples": 10000, "epochs": 2, "batch_rule": "fixed global batch", "global_batch": 1024}
    intra = one["placements"]["intra-node"]
    assert intra["validation"]["loo_mape_pct"] is not None and intra["validation"]["world_sizes_validated"] == [1, 2, 4, 8]
    preds = {r["world_size"]: r for r in intra["predictions"]}
    assert max(preds) == 64  # 8 x the largest measured world size
    assert preds[16]["extrapolated"] and not preds[8]["extrapolated"] and preds[16]["batch_per_rank"] == 64
    band = preds[16]["time_s"]
    assert band["lo"] <= band["value"] <= band["hi"]
    assert preds[1]["speedup"]["value"] == pytest.approx(1.0)
    for r in intra["predictions"]:
        assert r["gpu_hours"] == pytest.approx(r["world_size"] * r["time_s"]["value"] / 3600)
        assert r["efficiency"]["value"] == pytest.approx(r["speedup"]["value"] / r["world_size"])
    rec = one["recommendation"]
    assert rec["fastest"]["efficiency"]["value"] >= 0.5
    faster = [r for r in intra["predictions"] if r["efficiency"]["value"] >= 0.5]
    assert rec["fastest"]["time_s"]["value"] == min(r["time_s"]["value"] for r in faster)
    assert rec["cheapest"]["world_size"] == 1  # efficiency <= 1 everywhere: one rank costs the fewest GPU-hours
    assert "LOO MAPE" in rec["fastest"]["validation"]


def test_simulated_inter_node_is_never_recommended():
    rows = [point(1, r, 512, 0.5, 0.5, 0.0) for r in range(2)]
    rows += [point(2, r, 256, 0.26, 0.25, 0.01, nodes=2, num_hosts=1) for r in range(2)]
    ar = allreduce_sweep(ALPHA, BETA, ((2, 1, "inter-node"),), reps=1).assign(num_hosts=1)
    m = fit_performance_model(clean(frame(rows)), clean_allreduce(ar), settings(bootstrap_samples=20))
    one = m["models"]["kan-bspline [2,64,1]"]
    assert "simulated inter-node (one host)" in one["placements"]
    rec = one["recommendation"]
    assert rec["cheapest"]["placement_class"] == "single-rank"
    assert any("shared one host" in x for x in rec["not_considered"])
    assert all(c["placement_class"] != "simulated inter-node (one host)" for c in (rec["fastest"], rec["cheapest"]) if c)


def test_no_training_point_gives_a_reason():
    m = fit_performance_model(clean(frame([row("strong", 1, 1, status="failed", reason="oom")])),
                              clean_allreduce(pd.DataFrame()), settings(bootstrap_samples=20))
    assert m["models"] == {} and m["reason"]


def two_core_host_rows(corun: float) -> list[dict]:
    """Strong-scaling rows (1, 2, 4 ranks, 2 repeats) of one CPU host with 2 cores: compute takes
    s x c x its unshared time (s = max(p / 2, 1) time-sharing, c = `corun` for p > 1) and the
    all-reduce s x the ring model's."""
    n, rows = 4 * 5377, []
    for p in (1, 2, 4):
        s, c = max(p / 2, 1.0), (corun if p > 1 else 1.0)
        b = 256 // p
        comp = s * c * (1e-3 + 2e-6 * b)
        exposed = s * float(ring(p, n, ALPHA, BETA)) if p > 1 else 0.0
        for rep in range(2):
            r = point(p, rep, b, comp + exposed, comp, exposed)
            r.update(device_type="cpu", host_cpus=2, threads_per_rank=1)
            rows.append(r)
    return rows


def test_ranks_sharing_cores_time_share_their_all_reduce_too():
    """CPU ranks on a 2-core host: at 4 ranks (s = 2) the compute and the all-reduce both take twice
    their unshared time, in the sweep and in the steps. Fitted with that, alpha and beta come back
    and the held-out 4-rank step is predicted exactly; read as unshared, the 4-rank sweep would pull
    alpha and beta up and the 2-rank step would be over-predicted."""
    rows = two_core_host_rows(corun=1.0)
    ar = allreduce_sweep(ALPHA, BETA, ((1, 2, "intra-node"), (1, 4, "intra-node")), (4096, 65536, 1048576), reps=1)
    ar.loc[ar["world_size"] == 4, "time_s"] *= 2  # 4 ranks on 2 cores
    ar = clean_allreduce(ar.assign(device_type="cpu", host_cpus=2, threads_per_rank=1, num_hosts=1))
    train = training_rows(clean(frame(rows)))
    (alpha, beta), _ = fit_sweep(ar)
    assert alpha == pytest.approx(ALPHA, rel=1e-6) and beta == pytest.approx(BETA, rel=1e-6)
    v = validate(train, ar, "kan-bspline [2,64,1]", "intra-node")
    per_p = {e["world_size"]: e["error_pct"] for e in v["per_world_size"]}
    assert abs(per_p[4]) < 0.5 and abs(per_p[2]) < 0.5, per_p
    # the same sweep without its host facts (a file from before them) is read as unshared: alpha is off
    (alpha_old, _), _ = fit_sweep(ar.drop(columns=["host_cpus"]))
    assert alpha_old > 1.2 * ALPHA


def test_ranks_that_do_not_time_share_still_slow_each_other_and_the_sweep_says_how_much():
    """A 2-core host where two ranks' compute runs 1.5x slower together than alone (c(2) = 1.5; at
    4 ranks also time-shared, s = 2: 3x). The sweep's points measured it (corun_slowdown = s c). With
    it, the held-out lone rank is predicted from the 2- and 4-rank steps; without it (a sweep from
    before the measurement), the compute term carries the 1.5 and the lone rank is predicted 50% slow."""
    rows = two_core_host_rows(corun=1.5)
    ar = allreduce_sweep(ALPHA, BETA, ((1, 2, "intra-node"), (1, 4, "intra-node")), (4096, 65536, 1048576), reps=2)
    ar.loc[ar["world_size"] == 4, "time_s"] *= 2
    ar = ar.assign(device_type="cpu", host_cpus=2, threads_per_rank=1, num_hosts=1)
    ar["corun_slowdown"] = np.where(ar["world_size"] == 4, 3.0, 1.5) * np.where(ar["rep"] == 0, 0.9, 1.1)
    ar = clean_allreduce(ar)
    assert corun_curve(ar) == pytest.approx({1: 1.0, 2: 1.5})  # the mean over points, s divided out
    assert corun_curve(ar.assign(corun_slowdown=0.9)) == {1: 1.0, 2: 1.0}  # faster together: noise, held at 1
    train = training_rows(clean(frame(rows)))
    assert list(train.drop_duplicates("world_size")["busy_cores"]) == [1, 2, 2]
    v = validate(train, ar, "kan-bspline [2,64,1]", "intra-node")
    per_p = {e["world_size"]: e["error_pct"] for e in v["per_world_size"]}
    assert max(abs(e) for e in per_p.values()) < 0.5, per_p
    old = validate(train, ar.drop(columns=["corun_slowdown"]), "kan-bspline [2,64,1]", "intra-node")
    assert {e["world_size"]: e["error_pct"] for e in old["per_world_size"]}[1] > 40
    model = fit_performance_model(clean(frame(rows)), ar, settings(bootstrap_samples=20))
    assert model["corun"]["curve"] == {"2": 1.5} and "c(2) = 1.50" in model["corun"]["text"]


def test_corun_factor_interpolates_between_measured_cores_and_holds_beyond():
    curve = {1: 1.0, 2: 1.5, 4: 2.0}
    got = corun_factor(curve, [1, 2, 3, 8, float("nan")])
    assert list(got) == pytest.approx([1.0, 1.5, 1.75, 2.0, 1.0])
    assert list(corun_factor({}, [4])) == [1.0]  # nothing measured: no factor


def test_past_what_was_measured_the_placement_model_bounds_the_prediction_too():
    """Own runs keep the world-size model; past the largest placement measured, each prediction says how
    far it extrapolates and its band holds the placement model's interval (the forms the data allow),
    or says why the placement model would not go there."""
    th = settings(bootstrap_samples=30, predict_max_factor=8, max_gpus_per_node=64, efficiency_threshold=0.5)
    before = fit_performance_model(synthetic(sizes=(1, 2, 4)), sweep(), th)
    intra = before["models"]["kan-bspline [2,64,1]"]["placements"]["intra-node"]
    preds = {r["world_size"]: r for r in intra["predictions"]}
    assert "extrapolation" not in preds[4] and preds[4]["placement"] == "1x4"  # measured: as the model says
    eight = preds[8]
    assert eight["placement"] == "1x8" and "8 ranks a node, past the 4 measured" in eight["extrapolation"]
    assert "placement model" in eight["interval_from"]
    step = eight["step_time_s"]
    assert step["lo"] < step["value"] < step["hi"]
    # the efficiency and time bands follow the step's
    assert eight["time_s"]["lo"] < eight["time_s"]["value"] < eight["time_s"]["hi"]
    assert eight["efficiency"]["lo"] < eight["efficiency"]["value"] < eight["efficiency"]["hi"]
    # 16 ranks a node is past twice the 4 measured: the placement model refuses it, and the row says so
    assert "world-size model only" in preds[16]["interval_from"] and "ranks a node" in preds[16]["interval_from"]


def test_one_rank_is_its_measured_step_where_the_run_without_ddp_was_measured():
    """The single-rank class is compute alone: where the run without DDP was measured at the work's
    per-rank batch, its row is that measurement (no left-out error gates it), not the model's compute."""
    th = settings(bootstrap_samples=30, predict_max_factor=2, max_gpus_per_node=8, efficiency_threshold=0.5)
    rows = synthetic().to_dict("records")
    plain = []
    for rep, step in enumerate((0.0030, 0.0032, 0.0031)):  # the model's compute at b = 1024 is ~3.05 ms
        r = row("strong", 1, 1, rep, samples_per_s=1024 / step, batch_per_rank=1024, num_params=5377, ddp=False)
        r.update(step_time_s=step, grads_bytes=4 * 5377)
        plain.append(r)
    m = fit_performance_model(clean(frame(rows + plain)), sweep(), th)
    single = m["models"]["kan-bspline [2,64,1]"]["placements"]["single-rank"]
    assert single["validation"]["measured"] and single["validation"]["loo_mape_pct"] is None
    (one,) = single["predictions"]
    assert one["measured"] and one["step_time_s"]["value"] == pytest.approx(0.0031)
    assert one["step_time_s"]["lo"] < 0.0031 < one["step_time_s"]["hi"]
    assert one["time_s"]["value"] == pytest.approx(2 * 10 * 0.0031)  # 2 epochs of ceil(10000 / 1024) steps
