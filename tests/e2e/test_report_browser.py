"""Open a rendered report (two studies compared, expectations checked) in real headless Chromium: it
loads, the sections and a guideline are in the rendered DOM, the inline figures decode, and at 1300 px
and at the narrowest window headless Chromium gives (about 500 px) the page is no wider than the
window (tables scroll in their own box, images scale); a screenshot at each width is saved in the
test's temp dir.

Needs Debian's `chromium` (apt-get install chromium). Skipped only when chromium is missing and CI is not
"true"; under CI=true a missing browser is a failure. Set REPORT_SCREENSHOT=<path.png> to keep the wide
screenshot (the narrow one is kept next to it as <path>-narrow.png).
"""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from report_fixture import EXPECT, PROVENANCE, render, study_tables
from scaling.report.plots import FIGURES

pytestmark = pytest.mark.browser
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
# test-only instrumentation, added to a copy of the page: whether every inline image decoded, and
# the page's width against the window's once everything is laid out
PROBE = """<script>
window.addEventListener('load', () => {
  const imgs = Array.from(document.images);
  document.body.setAttribute('data-images', imgs.length + ':' + imgs.filter(i => i.complete && i.naturalWidth > 0).length);
  document.body.setAttribute('data-width', document.documentElement.scrollWidth + ':' + window.innerWidth);
});
</script>"""
WIDE, NARROW = 1300, 400  # headless Chromium does not go below about 500 px: it reports what it gave


def find_browser():
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def chromium(browser: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--disable-dev-shm-usage", f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def browser():
    path = find_browser()
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but no headless browser found (looked for {', '.join(BROWSERS)}); "
                        "install Debian's chromium: apt-get install -y chromium")
        pytest.skip("chromium is not installed (apt-get install -y chromium); required when CI=true")
    return path


def probe(browser: str, page: Path, profile: Path, width: int) -> tuple[str, int, int]:
    """(rendered DOM, page scroll width, window inner width) at a window `width` px wide."""
    dom = chromium(browser, profile, "--virtual-time-budget=5000", f"--window-size={width},2400", "--dump-dom",
                   page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    m = re.search(r'data-width="(\d+):(\d+)"', dom.stdout)
    assert m, "the page's load event did not fire"
    return dom.stdout, int(m.group(1)), int(m.group(2))


def screenshot(browser: str, page: Path, profile: Path, width: int, out: Path) -> None:
    res = chromium(browser, profile, "--hide-scrollbars", f"--window-size={width},4000", f"--screenshot={out}",
                   page.as_uri())
    assert res.returncode == 0 and out.exists(), res.stderr[-2000:]
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 50_000


def test_report_in_headless_chromium(browser, tmp_path):
    other = {"name": "cluster-b", "folder": "results/cluster-b", "tables": study_tables(scale=0.8),
             "provenance": {**PROVENANCE, "device_names": ["NVIDIA H100 80GB HBM3"], "hostnames": ["b1", "b2"]}}
    html = render(tmp_path, compare=[other], expect=EXPECT)
    page = tmp_path / "report.html"
    page.write_text(html, encoding="utf-8")
    probed = tmp_path / "report_probed.html"
    probed.write_text(html.replace("</body>", PROBE + "</body>"), encoding="utf-8")

    text, scroll, inner = probe(browser, probed, tmp_path / "profile-wide", WIDE)
    assert "<title>kanscale report: handbuilt</title>" in text
    for sid in ("summary", "guidelines", "expectations", "compare", "strong", "weak", "comm", "model_size"):
        assert re.search(rf'<section id="{sid}">', text), f"section {sid} missing from the rendered DOM"
    guidelines = re.search(r'<section id="guidelines">(.*?)</section>', text, re.S).group(1)
    assert 'class="guideline advice"' in guidelines and "efficiency" in guidelines
    total, decoded = map(int, re.search(r'data-images="(\d+):(\d+)"', text).groups())
    assert total == len(FIGURES) and decoded == total, f"{decoded} of {total} inline figures decoded"
    assert "<script>alert(1)</script>" not in text  # the escaped failure reason stayed text
    assert inner >= WIDE - 20 and scroll <= inner, f"page {scroll} px wide in a {inner} px window"

    _, scroll_n, inner_n = probe(browser, probed, tmp_path / "profile-narrow", NARROW)
    assert inner_n <= 520, f"headless Chromium gave a {inner_n} px window"
    assert scroll_n <= inner_n, f"page {scroll_n} px wide in a {inner_n} px window: horizontal overflow"

    wide, narrow = tmp_path / "report.png", tmp_path / "report-narrow.png"
    screenshot(browser, page, tmp_path / "profile-shot", WIDE, wide)
    screenshot(browser, page, tmp_path / "profile-shot-narrow", inner_n, narrow)
    keep = os.environ.get("REPORT_SCREENSHOT")
    if keep:
        Path(keep).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(wide, keep)
        shutil.copy(narrow, str(Path(keep).with_suffix("")) + "-narrow.png")


SAMPLE = Path(__file__).resolve().parents[2] / "docs"


def test_the_sample_report_renders_and_concludes(browser, tmp_path):
    """docs/sample-report.html (made by `make sample-report`, linked from README) opens in a real
    browser, its figures decode, and its guidelines section holds decided advice, as its note says."""
    html = (SAMPLE / "sample-report.html").read_text(encoding="utf-8")
    probed = tmp_path / "sample.html"
    probed.write_text(html.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    text, scroll, inner = probe(browser, probed, tmp_path / "profile", WIDE)
    guidelines = re.search(r'<section id="guidelines">(.*?)</section>', text, re.S).group(1)
    advice = re.findall(r'class="guideline advice"', guidelines)
    note = json.loads((SAMPLE / "sample-report.json").read_text())
    assert len(advice) == note["guidelines"]["advice"] >= 3, note
    assert "decided at look" in guidelines
    total, decoded = map(int, re.search(r'data-images="(\d+):(\d+)"', text).groups())
    assert total > 0 and decoded == total
    assert scroll <= inner
    png = (SAMPLE / "sample-report-phone.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(png[16:20], "big") == 390
