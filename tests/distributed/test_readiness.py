"""The DDP-readiness checks (kan/probes/readiness.py) on a real 2-rank gloo group: every built-in and shipped
implementation passes all five; the deliberately broken modules (tests/fixtures/broken_kan.py) fail
the checks they break, naming the parameter or buffer; and a readiness point through the real trainer
records its verdict."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kan.contract import factory
from kan.contract.point import ModelConfig, Placement, Point, TrainConfig

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "broken_kan.py"
EXAMPLES = ROOT / "examples"
CHECKS = ["unused_parameters", "buffers_in_sync", "replicas_identical", "device_placement", "cuda_graph_capture"]


def own(path: Path, function: str) -> dict:
    return {"impl": f"{path}:{function}", "impl_sha256": factory.file_sha256(path)}


def torchrun(*args, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                           "--max-restarts=0", *args], cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"},
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory) -> dict:
    models = [{"impl": "kanscale", "basis": b} for b in ("bspline", "rbf", "chebyshev")]
    models += [{"impl": "mlp"}, {"impl": "mlp_matched"}, own(EXAMPLES / "tiny_kan.py", "build"),
               own(EXAMPLES / "inkan_kan.py", "build"), own(FIXTURE, "drifting"), own(FIXTURE, "cpu_constant")]
    models = [{"widths": [2, 8, 1], "grid_size": 5, **m} for m in models]
    out = tmp_path_factory.mktemp("readiness") / "checks.json"
    r = torchrun(str(ROOT / "tests" / "distributed" / "readiness_ranks.py"), json.dumps(models), str(out))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    found = json.loads(out.read_text())
    return {label: {c["check"]: c for c in checks} for label, checks in found.items()}


@pytest.mark.parametrize("label", ["kanscale_bspline", "kanscale_rbf", "kanscale_chebyshev", "mlp", "mlp_matched",
                                   "tiny_kan_build", "inkan_kan_build"])
def test_built_in_and_shipped_implementations_pass_every_check(verdicts, label):
    checks = verdicts[label]
    assert list(checks) == CHECKS
    assert all(c["pass"] is True for c in checks.values()), {k: c["detail"] for k, c in checks.items()}


def test_a_grid_updated_from_each_ranks_batch_and_an_unused_parameter_fail_with_their_names(verdicts):
    checks = verdicts["broken_kan_drifting"]
    assert checks["unused_parameters"]["pass"] is False and checks["unused_parameters"]["names"] == ["forgotten"]
    assert "forgotten" in checks["unused_parameters"]["detail"]
    assert "find_unused_parameters=True" in checks["unused_parameters"]["fix"]
    buffers = checks["buffers_in_sync"]
    # the grid differs between the ranks; the buffer training never changes is not blamed
    assert buffers["pass"] is False and buffers["names"] == ["grid"], buffers
    assert "grid" in buffers["detail"] and "fixed_scale" not in buffers["detail"]
    assert "all-reduce" in buffers["fix"]
    # DDP keeps the gradients in step (it trained with find_unused_parameters), so the weights agree
    assert checks["replicas_identical"]["pass"] is True, checks["replicas_identical"]
    assert checks["device_placement"]["pass"] is True


def test_a_tensor_made_off_the_inputs_device_fails_device_placement(verdicts):
    checks = verdicts["broken_kan_cpu_constant"]
    placement = checks["device_placement"]
    assert placement["pass"] is False and "a tensor on cpu in add" in placement["detail"], placement
    assert "device=x.device" in placement["fix"]
    assert all(checks[c]["pass"] is True for c in CHECKS[:3])
    # the capture check runs on meta, where a CPU tensor meets the input: not checked, not passed
    assert checks["cuda_graph_capture"]["pass"] is None and "not checked" in checks["cuda_graph_capture"]["detail"]


def test_a_readiness_point_through_the_trainer_records_its_verdict(tmp_path):
    m = ModelConfig(widths=(2, 8, 1), grid_size=5, **own(FIXTURE, "drifting"))
    point = Point(experiment="readiness", model=m, placement=Placement(nodes=1, gpus_per_node=2, device="cpu"),
                  train=TrainConfig(samples=512, batch_per_rank=32, epochs=1, max_steps=6, warmup_steps=0))
    out = tmp_path / "rec.json"
    r = torchrun("-m", "kan.train", *point.to_argv(), "--pg-timeout-s=60", "--out", str(out))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rec = json.loads(out.read_text())
    assert rec["status"] == "ok" and rec["world_size"] == 2 and len(rec["ranks"]) == 2
    verdict = {c["check"]: c["pass"] for c in rec["readiness"]["checks"]}
    assert verdict == {"unused_parameters": False, "buffers_in_sync": False, "replicas_identical": True,
                       "device_placement": True, "cuda_graph_capture": True}
    assert "unused_parameters FAIL, buffers_in_sync FAIL" in r.stdout
