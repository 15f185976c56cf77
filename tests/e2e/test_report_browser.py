"""Open a rendered report (two studies compared, expectations checked) in real headless Chromium: it
loads, the sections and a guideline are in the rendered DOM, the inline figures decode, and at 1300 px
and at the narrowest window headless Chromium gives (about 500 px) the page is no wider than the
window (tables scroll in their own box, images scale); a screenshot at each width is saved in the
test's temp dir. The sample reports in docs/ (make demo's and config/realdata.yaml's) are laid out
as a reader gets them, folded sections closed: the answer inside the first 800 px at 1280 px, the page
at most 4,000 px tall, no sideways scroll in a 390 px phone frame, no id with a space.

Needs Debian's `chromium` (apt-get install chromium). Skipped only when chromium is missing and CI is not
"true"; under CI=true a missing browser is a failure. Set REPORT_SCREENSHOT=<path.png> to keep the wide
screenshot (the narrow one is kept next to it as <path>-narrow.png).
"""

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


# a phone-width window headless Chromium will not open: the page in an iframe of that width, measured
# by its parent (file:// pages may read each other only with --allow-file-access-from-files)
FRAME = """<!DOCTYPE html><html><body style="margin:0"><iframe id="f" src="PAGE" style="width:WIDTHpx;height:900px;border:0"></iframe>
<script>
document.getElementById('f').addEventListener('load', () => {
  const w = document.getElementById('f').contentWindow, d = w.document, a = d.getElementById('answer');
  document.body.setAttribute('data-layout', [d.documentElement.scrollWidth, w.innerWidth, d.documentElement.scrollHeight,
    a ? Math.round(a.getBoundingClientRect().top) : -1, d.querySelectorAll('[id*=" "]').length].join(':'));
});
</script></body></html>"""


def layout(browser: str, page: Path, profile: Path, width: int) -> dict:
    """The page as laid out at `width` CSS px, details as shipped: its scroll width, the frame's
    inner width, its height, the top of #answer, and how many ids hold a space."""
    frame = page.with_name(f"frame-{width}.html")
    frame.write_text(FRAME.replace("PAGE", page.name).replace("WIDTH", str(width)), encoding="utf-8")
    dom = chromium(browser, profile, "--allow-file-access-from-files", "--virtual-time-budget=5000",
                   f"--window-size={width + 20},1000", "--dump-dom", frame.as_uri())
    m = re.search(r'data-layout="([\d:-]+)"', dom.stdout)
    assert dom.returncode == 0 and m, dom.stderr[-2000:]
    keys = ("scroll_width", "inner_width", "height", "answer_top", "ids_with_space")
    return dict(zip(keys, map(int, m.group(1).split(":"))))


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
    for sid in ("answer", "expectations", "compare", "strong", "weak", "comm", "model_size", "method"):
        assert re.search(rf'<section id="{sid}">', text), f"section {sid} missing from the rendered DOM"
    strong = re.search(r'<section id="strong">(.*?)</section>', text, re.S).group(1)
    assert 'class="guideline advice"' in strong and "efficiency" in strong
    total, decoded = map(int, re.search(r'data-images="(\d+):(\d+)"', text).groups())
    assert total == len(FIGURES) and decoded == total, f"{decoded} of {total} inline figures decoded"
    assert "<script>alert(1)</script>" not in text  # the escaped failure reason stayed text
    assert inner >= WIDE - 20 and scroll <= inner, f"page {scroll} px wide in a {inner} px window"

    _, scroll_n, inner_n = probe(browser, probed, tmp_path / "profile-narrow", NARROW)
    assert inner_n <= 520, f"headless Chromium gave a {inner_n} px window"
    assert scroll_n <= inner_n, f"page {scroll_n} px wide in a {inner_n} px window: horizontal overflow"
    phone = layout(browser, page, tmp_path / "profile-phone", 390)
    assert phone["scroll_width"] <= phone["inner_width"] == 390, phone

    wide, narrow = tmp_path / "report.png", tmp_path / "report-narrow.png"
    screenshot(browser, page, tmp_path / "profile-shot", WIDE, wide)
    screenshot(browser, page, tmp_path / "profile-shot-narrow", inner_n, narrow)
    keep = os.environ.get("REPORT_SCREENSHOT")
    if keep:
        Path(keep).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(wide, keep)
        shutil.copy(narrow, str(Path(keep).with_suffix("")) + "-narrow.png")


def test_a_link_into_a_folded_section_opens_it(browser, tmp_path):
    """Folded sections are one click away: following a link to one (or to a guideline inside one)
    opens it, so the nav bar and the answer's links land on something visible."""
    page = tmp_path / "report.html"
    probe_open = """<script>
window.addEventListener('load', () => {
  const before = document.querySelector('#strong > details').open;
  document.querySelector('nav a[href="#strong"]').click();
  document.body.setAttribute('data-open', before + ':' + document.querySelector('#strong > details').open);
});
</script>"""
    page.write_text(render(tmp_path, expect=EXPECT).replace("</body>", probe_open + PROBE + "</body>"), encoding="utf-8")
    text, _, _ = probe(browser, page, tmp_path / "profile", WIDE)
    assert 'data-open="false:true"' in text


SAMPLE = Path(__file__).resolve().parents[2] / "docs"
SAMPLES = ("sample-report.html", "sample-report-realdata.html")


@pytest.mark.parametrize("name", SAMPLES)
def test_a_sample_report_answers_on_its_first_screen(browser, tmp_path, name):
    """docs/<name> (made by `make sample-report`, linked from README) opens in a real browser with its
    figures decoded and the answer first: #answer within the first 800 px at 1280 px, the page at most
    4,000 px tall with its sections folded as shipped, no sideways scroll at 390 px, every id a slug."""
    html = (SAMPLE / name).read_text(encoding="utf-8")
    page = tmp_path / name
    page.write_text(html, encoding="utf-8")
    probed = tmp_path / f"probed-{name}"
    probed.write_text(html.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    text, scroll, inner = probe(browser, probed, tmp_path / "profile", WIDE)
    total, decoded = map(int, re.search(r'data-images="(\d+):(\d+)"', text).groups())
    assert total > 0 and decoded == total
    desk = layout(browser, page, tmp_path / "profile-desk", 1280)
    assert 0 <= desk["answer_top"] < 800 and desk["height"] <= 4000, desk
    assert desk["ids_with_space"] == 0, desk
    phone = layout(browser, page, tmp_path / "profile-phone", 390)
    assert phone["scroll_width"] <= phone["inner_width"], phone
    answer = re.search(r'<section id="answer">(.*?)</section>', text, re.S).group(1)
    assert 'class="answer answer-' in answer and "runs ok" in answer


def test_the_sample_phone_screenshot():
    png = (SAMPLE / "sample-report-phone.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(png[16:20], "big") == 390


OPENED = """<!DOCTYPE html><html><body style="margin:0"><iframe id="f" src="PAGE" style="width:390px;height:900px;border:0"></iframe>
<script>
document.getElementById('f').addEventListener('load', () => {
  const d = document.getElementById('f').contentWindow.document;
  d.querySelectorAll('details').forEach(x => x.open = true);
  setTimeout(() => {
    const boxes = [...d.querySelectorAll('.guideline .scroll')];
    document.body.setAttribute('data-boxes', boxes.length + ':' + boxes.filter(e => e.scrollWidth > e.clientWidth + 1).length);
  }, 300);
});
</script></body></html>"""


@pytest.mark.parametrize("name", SAMPLES)
def test_a_guidelines_numbers_fit_a_phone_with_every_section_open(browser, tmp_path, name):
    """At 390 px, a guideline's tables of numbers wrap their cells rather than hide a column: at most 30%
    of them still scroll inside their box (the wide prediction tables; before the cells wrapped, 9 of 16
    and 30 of 56 did)."""
    page = tmp_path / name
    page.write_text((SAMPLE / name).read_text(encoding="utf-8"), encoding="utf-8")
    frame = tmp_path / "opened.html"
    frame.write_text(OPENED.replace("PAGE", name), encoding="utf-8")
    dom = chromium(browser, tmp_path / "profile-open", "--allow-file-access-from-files", "--virtual-time-budget=5000",
                   "--window-size=410,1000", "--dump-dom", frame.as_uri())
    m = re.search(r'data-boxes="(\d+):(\d+)"', dom.stdout)
    assert dom.returncode == 0 and m, dom.stderr[-2000:]
    boxes, over = map(int, m.groups())
    assert boxes > 0 and over <= 0.3 * boxes, (boxes, over)
