"""Open a rendered report in real headless Chromium: it loads, the sections and a guideline are in the
rendered DOM, the inline figures decode, and a screenshot is taken.

Needs Debian's `chromium` (apt-get install chromium). Skipped only when chromium is missing and CI is not
"true"; under CI=true a missing browser is a failure. Set REPORT_SCREENSHOT=<path.png> to keep the screenshot.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from report_fixture import render  # noqa: E402

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
# test-only instrumentation, added to a copy of the page: records whether every inline image decoded
PROBE = """<script>
window.addEventListener('load', () => {
  const imgs = Array.from(document.images);
  document.body.setAttribute('data-images', imgs.length + ':' + imgs.filter(i => i.complete && i.naturalWidth > 0).length);
});
</script>"""


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


def test_report_in_headless_chromium(browser, tmp_path):
    html = render(tmp_path)
    page = tmp_path / "report.html"
    page.write_text(html, encoding="utf-8")
    probed = tmp_path / "report_probed.html"
    probed.write_text(html.replace("</body>", PROBE + "</body>"), encoding="utf-8")

    dom = chromium(browser, tmp_path / "profile-dom", "--virtual-time-budget=5000", "--dump-dom",
                   probed.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    text = dom.stdout
    assert "<title>kanscale report: handbuilt</title>" in text
    for sid in ("strong", "weak", "comm", "model_size", "guidelines"):
        assert re.search(rf'<section id="{sid}">', text), f"section {sid} missing from the rendered DOM"
    guidelines = re.search(r'<section id="guidelines">(.*?)</section>', text, re.S).group(1)
    assert 'class="guideline advice"' in guidelines and "efficiency" in guidelines
    images = re.search(r'data-images="(\d+):(\d+)"', text)
    assert images, "the page's load event did not fire"
    total, decoded = map(int, images.groups())
    assert total == 7 and decoded == total, f"{decoded} of {total} inline figures decoded"
    assert "<script>alert(1)</script>" not in text  # the escaped failure reason stayed text

    shot = tmp_path / "report.png"
    res = chromium(browser, tmp_path / "profile-shot", "--hide-scrollbars", "--window-size=1300,2400",
                   f"--screenshot={shot}", page.as_uri())
    assert res.returncode == 0 and shot.exists(), res.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000
    keep = os.environ.get("REPORT_SCREENSHOT")
    if keep:
        Path(keep).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, keep)
