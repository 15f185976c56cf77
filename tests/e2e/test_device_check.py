"""benchmarks/device_check.sh without a GPU: it runs what it can, says what it skipped, exits 0, and
writes one results file."""

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
    for part in ("## 1. machine", "## 2. tests", "## 3. layer benchmark", "## 4. the seed paper's 1-GPU point",
                 "## 5. the tiny study on the device", "## 6. DDP settings on the device", "## done"):
        assert part in text, part
    assert "tests: exit 0" in text, text[-3000:]
    assert "paper point (cpu, 2 epochs): exit 0" in text
    assert "ok, gloo" in text  # the 1x1 and 1x2 points ran through the launcher on the CPU
    # DDP's hooks at 2 gloo ranks: fp16 sends half of none's bytes; bf16 is a failed point naming why
    none = re.search(r"ddp none: ok, world 2, gloo, .*?([\d.,]+) KiB per synced step", text)
    fp16 = re.search(r"ddp fp16: ok, world 2, gloo, .*?([\d.,]+) KiB per synced step", text)
    assert none and fp16, text[-3000:]
    assert float(fp16.group(1).replace(",", "")) == pytest.approx(float(none.group(1).replace(",", "")) / 2, rel=0.02)
    assert re.search(r"ddp bf16: failed: .*comm_hook=bf16 cannot run on gloo", text)
