"""benchmarks/device_check.sh without a GPU: it runs what it can, says what it skipped, exits 0, and
writes one results file; a step with no time left in its budget is skipped and named."""

import os
import re
import subprocess
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
