"""Expectations (report.expect): the grammar's errors name the key and the allowed values; verdicts
against hand-built tables with their CIs; the CI command's exit status."""

import json
import math

import pytest
from report_fixture import study_tables
from scaling.decide.expectations import (FAIL, INCONCLUSIVE, METRICS, NOT_MEASURED, PASS, allowed_keys, evaluate,
                                  expectation_problems, validate_expectations, verdict)

import check_expectations
import plan


@pytest.fixture(scope="module")
def tables():
    return study_tables()


def one(problems):
    assert len(problems) == 1, problems
    return problems[0]


def test_unknown_metric_lists_the_allowed_ones():
    key, msg = one(expectation_problems([{"metric": "efficency", "min": 0.7}]))
    assert key == "report.expect[0].metric" and "'efficency' is not a known metric" in msg
    for name in METRICS:
        assert name in msg


@pytest.mark.parametrize("item, key, text", [
    ({"metric": "strong_efficiency"}, "report.expect[0]", "give min, max or both"),
    ({"metric": "strong_efficiency", "min": 70}, "report.expect[0].min", "write 0.7 if you mean 70%"),
    ({"metric": "strong_efficiency", "min": 0.9, "max": 0.5}, "report.expect[0]", "no value can pass"),
    ({"metric": "strong_efficiency", "min": 0.7, "ranks": 8}, "report.expect[0]", "unknown key(s) 'ranks'"),
    ({"metric": "strong_efficiency", "min": 0.7, "size_bytes": 4096}, "report.expect[0]", "allowed keys: metric"),
    ({"metric": "strong_efficiency", "min": 0.7, "world_size": 0}, "report.expect[0].world_size", "positive integer"),
    ({"metric": "exposed_comm_pct", "max": 10, "experiment": "allreduce"}, "report.expect[0].experiment", "strong, weak, comm"),
    ({"metric": "strong_efficiency", "min": 0.7, "placement": "inter"}, "report.expect[0].placement", "intra-node"),
    ({"metric": "strong_efficiency", "min": "high"}, "report.expect[0].min", "not a finite number"),
])
def test_grammar_errors_name_key_and_allowed(item, key, text):
    k, msg = one(expectation_problems([item]))
    assert k == key and text in msg


def test_valid_grammar_and_shapes():
    ok = [{"metric": "strong_efficiency", "world_size": 8, "min": 0.7}, {"metric": "exposed_comm_pct", "max": 10},
          {"metric": "model_loo_mape_pct", "placement": "intra-node", "max": 25, "name": "model good"}]
    assert expectation_problems(ok) == [] and validate_expectations(ok) == ok
    assert expectation_problems(None) == [] and validate_expectations(None) == []
    assert one(expectation_problems({"metric": "x"}))[0] == "report.expect"
    assert one(expectation_problems(["strong_efficiency"]))[0] == "report.expect[0]"
    with pytest.raises(ValueError, match=r"report.expect\[1\].metric"):
        validate_expectations(ok[:1] + [{"metric": "nope", "max": 1}])


def test_schema_lists_the_same_keys(root):
    schema = plan.load_schema(root / "workflow" / "schemas" / "config.schema.yaml")
    report = schema["properties"]["report"]["properties"]
    assert report["expect"]["default"] == [] and report["compare"]["default"] == []
    keys = set(report["expect"]["items"]["properties"])
    assert keys == {k for m in METRICS for k in allowed_keys(m)}
    cfg = plan.load_config(root / "config" / "local.yaml")
    assert cfg["report"]["expect"] == [] and cfg["report"]["compare"] == []


def test_verdict_against_the_interval():
    assert verdict(0.8, 0.75, 0.85, lower=0.7) == PASS
    assert verdict(0.6, 0.55, 0.65, lower=0.7) == FAIL
    assert verdict(0.72, 0.65, 0.79, lower=0.7) == INCONCLUSIVE
    assert verdict(8.0, 7.0, 9.0, upper=10) == PASS and verdict(12, 11, 13, upper=10) == FAIL
    assert verdict(0.8, math.nan, math.nan, lower=0.7) == INCONCLUSIVE  # one repeat: no interval
    assert verdict(0.8, 0.75, 0.85, lower=0.7, upper=0.82) == INCONCLUSIVE  # the worse bound decides


def test_evaluate_on_the_hand_built_study(tables):
    # strong efficiency 90% [77.8, 104.1] at 2 ranks (the delta method on the log scale), 60% at 4;
    # comm exposed 10% and 25%
    res = evaluate([{"metric": "strong_efficiency", "world_size": 2, "min": 0.7},
                    {"metric": "strong_efficiency", "world_size": 4, "min": 0.7},
                    {"metric": "strong_efficiency", "world_size": 4, "min": 0.6},
                    {"metric": "exposed_comm_pct", "experiment": "comm", "max": 20},
                    {"metric": "weak_efficiency", "world_size": 8, "min": 0.8},
                    {"metric": "strong_efficiency", "min": 0.5},
                    {"metric": "model_loo_mape_pct", "placement": "intra-node", "max": 25},
                    {"metric": "strong_samples_per_s", "model": "kan-bspline", "world_size": 1, "min": 900}], tables)
    got = [e["status"] for e in res["expectations"]]
    assert got == [PASS, FAIL, INCONCLUSIVE, FAIL, NOT_MEASURED, PASS, PASS, PASS]
    assert res["counts"] == {PASS: 4, FAIL: 2, INCONCLUSIVE: 1, NOT_MEASURED: 1}
    r = res["expectations"][0]["rows"][0]
    # symmetric half-width 0.131 is a relative 0.131 / 0.9 on the log scale: 0.9 e^-0.1457 = 0.778
    assert r["value"] == pytest.approx(0.9) and r["ci_lo"] == pytest.approx(0.9 * math.exp(-0.131 / 0.9), abs=1e-3)
    assert res["expectations"][0]["name"] == "strong_efficiency at world_size=2 ≥ 70.0%"
    # the baseline's efficiency is 1 by definition: exact, judged on the value
    base = [r for r in res["expectations"][5]["rows"] if r["exact"]]
    assert len(base) == 1 and base[0]["value"] == 1.0 and base[0]["ci_lo"] is None
    assert res["expectations"][4]["reason"] == "no measured row matches the selectors"
    comm = res["expectations"][3]["rows"]
    assert [x["status"] for x in comm] == [PASS, FAIL] and "2x1" in comm[1]["where"]


def test_not_measured_and_one_repeat(tables):
    t = {k: (v.copy() if hasattr(v, "copy") else v) for k, v in tables.items()}
    s = t["strong"]
    s.loc[s["world_size"] == 4, ["efficiency", "efficiency_ci_lo", "efficiency_ci_hi"]] = math.nan
    s.loc[s["world_size"] == 4, "not_ok"] = "failed: oom"
    s.loc[s["world_size"] == 2, ["efficiency_ci_lo", "efficiency_ci_hi"]] = math.nan
    res = evaluate([{"metric": "strong_efficiency", "world_size": 4, "min": 0.5},
                    {"metric": "strong_efficiency", "world_size": 2, "min": 0.5}], t)
    a, b = res["expectations"]
    assert a["status"] == NOT_MEASURED and a["rows"][0]["reason"] == "failed: oom"
    assert b["status"] == INCONCLUSIVE and "no confidence interval" in b["rows"][0]["reason"]


def test_description_names_the_baseline_as_it_ran(tables):
    expect = [{"metric": "strong_speedup", "min": 1}, {"metric": "weak_efficiency", "min": 0.5}]
    ddp = [e["description"] for e in evaluate(expect, tables)["expectations"]]
    assert ddp == ["strong-scaling speedup vs the DDP baseline",
                   "weak-scaling efficiency vs the DDP baseline (0.7 = 70%)"]
    # imported runs without a one-rank DDP run: the ratios are taken against the plain one-rank run
    t = dict(tables)
    for name in ("strong", "weak"):
        t[name] = tables[name].copy()
        t[name]["ddp"] = t[name]["ddp"].astype(object)
        t[name].loc[t[name]["is_baseline"].astype(bool), "ddp"] = False
    plain = [e["description"] for e in evaluate(expect, t)["expectations"]]
    assert plain[0] == "strong-scaling speedup vs the baseline (1 rank without DDP)"
    assert "DDP baseline" not in plain[1]


def test_check_command_exit_status(tables, tmp_path, capsys):
    def write(expect):
        path = tmp_path / "expectations.json"
        path.write_text(json.dumps(evaluate(expect, tables)))
        return str(path)

    passing = write([{"metric": "strong_efficiency", "world_size": 2, "min": 0.7}])
    assert check_expectations.main([passing]) == 0
    assert "1 of 1 expectation(s) met" in capsys.readouterr().out
    failing = write([{"metric": "strong_efficiency", "world_size": 2, "min": 0.7},
                     {"metric": "exposed_comm_pct", "experiment": "comm", "max": 20}])
    assert check_expectations.main([failing]) == 1
    out = capsys.readouterr().out
    assert "FAIL fail" in out and "25" in out and "2x1" in out
    unsure = write([{"metric": "strong_efficiency", "world_size": 4, "min": 0.6}])
    assert check_expectations.main([unsure]) == 1
    assert check_expectations.main([unsure, "--allow-inconclusive"]) == 0
    missing = write([{"metric": "weak_efficiency", "world_size": 8, "min": 0.8}])
    assert check_expectations.main([missing, "--allow-inconclusive"]) == 1
    assert check_expectations.main([missing, "--allow-not-measured"]) == 0
    capsys.readouterr()
    assert check_expectations.main([str(tmp_path / "absent.json")]) == 2
    (tmp_path / "bad.json").write_text('{"expectations": [{"name": "x"}]}')
    assert check_expectations.main([str(tmp_path / "bad.json")]) == 2
    (tmp_path / "garbage.json").write_text("{not json")
    assert check_expectations.main([str(tmp_path / "garbage.json")]) == 2
    assert "cannot read expectations" in capsys.readouterr().err
