"""benchmarks/device_check.sh without a GPU: it runs what it can, says what it skipped, exits 0, and
writes one results file; a step with no time left in its budget is skipped and named."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this checks the CPU fallback")
def test_device_check_degrades_on_cpu(tmp_path):
    r = subprocess.run(["bash", str(ROOT / "benchmarks" / "device_check.sh"), str(tmp_path), "--quick"],
                       cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    text = (tmp_path / "device_check.md").read_text()
    assert "**No CUDA device.** Skipped:" in text
    for part in ("## 1. machine", "## 2. tests", "## 3. the seed paper's 1-GPU point, eager and captured",
                 "## 4. layer benchmark", "## 5. the tiny study on the device", "## 6. DDP settings on the device",
                 "## 7. summary: the paper's point, eager against captured", "## done"):
        assert part in text, part
    assert "tests: exit 0" in text, text[-3000:]
    assert "paper point (cpu, 2 epochs): exit 0" in text
    # the summary table: the eager row with its anatomy, the captured run named as not run on a CPU
    assert re.search(r"\| eager \| [\d.]+ \| \d+ aten operators .*\| (dispatch|compute|communication) \|", text)
    assert "| captured (training.cuda_graphs) | missing:" in text
    assert "paper point captured: skipped, a CUDA graph needs a CUDA device" in text
    assert "ok, gloo" in text  # the 1x1 and 1x2 points ran through the launcher on the CPU
    # DDP's hooks at 2 gloo ranks: fp16 sends half of none's bytes; bf16 is a failed point naming why
    none = re.search(r"ddp none: ok, world 2, gloo, .*?([\d.,]+) KiB per synced step", text)
    fp16 = re.search(r"ddp fp16: ok, world 2, gloo, .*?([\d.,]+) KiB per synced step", text)
    assert none and fp16, text[-3000:]
    assert float(fp16.group(1).replace(",", "")) == pytest.approx(float(none.group(1).replace(",", "")) / 2, rel=0.02)
    assert re.search(r"ddp bf16: failed: .*comm_hook=bf16 cannot run on gloo", text)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this checks the CPU fallback")
def test_device_check_skips_what_its_budget_cannot_hold(tmp_path):
    # a 25 s budget: the machine part fits, the rest is skipped by name, the script still ends with its summary
    r = subprocess.run(["bash", str(ROOT / "benchmarks" / "device_check.sh"), str(tmp_path), "--quick"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, "BUDGET_S": "25"})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    text = (tmp_path / "device_check.md").read_text()
    assert re.search(r"ddp settings on cpu: skipped, out of time \(-?\d+ s of 25 s left\)", text), text[-2000:]
    assert "## done" in text and "| eager | missing:" in text


@pytest.mark.skipif(torch.cuda.is_available(), reason="the rehearsal is for a machine without the GPU")
def test_the_rehearsal_runs_every_step_under_the_gpu_images_packages(tmp_path):
    """REHEARSE=1: every Python the check starts imports only what the GPU machine's image has; every
    test file of the GPU run collects; the GPU steps are skipped by name; at most 8 files come back."""
    r = subprocess.run(["bash", str(ROOT / "benchmarks" / "device_check.sh"), str(tmp_path)], cwd=ROOT,
                       capture_output=True, text=True, timeout=300, env={**os.environ, "REHEARSE": "1"})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    text = (tmp_path / "device_check.md").read_text()
    assert "rehearse=1" in text and "imports held to the GPU machine's image" in text
    assert "collect (the GPU run's test files): exit 0" in text and "tests: exit 0" in text, text[-3000:]
    assert "No module named" not in text, text[-3000:]
    assert "paper point captured: skipped, a CUDA graph needs a CUDA device" in text
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) <= 8 and (tmp_path / "runs.tar.gz").is_file(), files
    # every step's whole output streamed into steps.log as it came, each under its own time limit
    log = (tmp_path / "steps.log").read_text()
    for step in ("machine", "tests", "points on cpu", "ddp settings on cpu"):
        assert re.search(rf"=== {step} \((\d+) s at most\) ===", log), step
    limits = {m.group(1): int(m.group(2)) for m in re.finditer(r"=== (.+?) \((\d+) s at most\) ===", log)}
    assert limits["tests"] == 400 * 18 // 100 and limits["machine"] == 400 * 4 // 100  # its share of 400 s


def test_the_guard_refuses_what_the_image_lacks():
    """The rehearsal's guard itself: jsonschema (the planner's, absent from the image) is refused with
    the list named; the repository's code and the image's packages import."""
    guard = ROOT / "benchmarks" / "rehearse"
    code = ("import numpy, yaml, kan.contract.point\n"
            "try:\n    import jsonschema\nexcept ModuleNotFoundError as e:\n    print('refused', e)\n")
    env = {**os.environ, "PYTHONPATH": f"{guard}:{ROOT}:{ROOT / 'workflow' / 'scripts'}"}
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "refused No module named 'jsonschema' on the GPU machine" in r.stdout
    assert "benchmarks/gpu-image-packages.txt" in r.stdout
