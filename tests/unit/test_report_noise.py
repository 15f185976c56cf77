"""The report's visible text reads clean (tests/report_noise.py): the checker finds each kind of
noise it names, and the sample reports in docs/ carry none of it."""

from pathlib import Path

import pytest
from report_noise import findings, visible_text

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize("html, kind", [
    ("<p>1/β = 2.67e+07 GB/s</p>", "e-notation"), ("<td>2.91e-05</td>", "e-notation"),
    ("<p>steps to target 96 [96, 96]</p>", "zero-width interval"),
    ("<td>100% [100%, 100%]</td>", "zero-width interval"), ("<td>1.00 [1.00, 1.00]</td>", "zero-width interval"),
    ("<td>[-10.2%, 63.9%]</td>", "negative share"), ("<p>2 point(s)</p>", "(s) plural"),
    ("<p>1 process(es) ran</p>", "(s) plural"), ("<p>1 CPU rank: 2.9 GPU-hours</p>", "GPU-hours on CPUs")])
def test_each_kind_of_noise_is_found(html, kind):
    assert [f for f in findings(html, gpu=False) if f.startswith(kind)], findings(html, gpu=False)


@pytest.mark.parametrize("html", [
    "<p>114.23 [113.91, 114.55] ms</p>", "<p>1 GPU: 2.5 GPU-hours</p>", "<td>[0%, 64%]</td>",
    "<p>lr</p><code>lr: 1e-3</code>", "<td>96 [95, 97]</td>",
    "<p>2 points at 12 [12.0, 12.5]</p>"])
def test_clean_text_is_not_flagged(html):
    assert findings(html, gpu="GPU:" in html) == []


def test_code_and_scripts_are_not_prose():
    assert visible_text("<p>a</p><script>x = 1e-5</script><pre>lr: 1e-3</pre><p>b</p>").split() == ["a", "b"]


@pytest.mark.parametrize("name", ["sample-report.html", "sample-report-realdata.html"])
def test_the_sample_reports_carry_no_noise(name):
    found = findings((DOCS / name).read_text(encoding="utf-8"), gpu=False)  # both ran on CPUs
    assert not found, f"docs/{name}: " + "\n".join(found[:20])
