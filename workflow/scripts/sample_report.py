"""The sample reports in the repository (linked from README.md): a study's report as `make demo` wrote
it, and a note of the machine, the date, the wall time and what the guidelines decided. The demo's
(config/local.yaml) is docs/sample-report.html with a phone-width screenshot; another study's is
docs/sample-report-<study>.html (config/realdata.yaml: docs/sample-report-realdata.html).

    make sample-report      # make demo, then: python workflow/scripts/sample_report.py <wall s> local CONFIG;
                            # the same for config/realdata.yaml

Needs Debian's chromium for the screenshot (the report's browser test uses the same).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from kan.metrics import cpu_model

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
DOC_TIMINGS = (ROOT / "README.md", ROOT / "config" / "README.md")  # where a sample's wall time is quoted
PHONE_WIDTH = 390  # CSS px of a common phone
# what turns a study's records into its report: a sample made by other code may say other things
ANALYSIS = (ROOT / "workflow" / "scripts" / "scaling", ROOT / "workflow" / "report" / "templates")


def analysis_digest() -> str:
    """One fingerprint of the analysis package's sources and the report template, written into each
    sample's note: tests/unit/test_sample_reports.py fails when today's code differs from the code
    that made a sample, so a sample is current by content, not only by template."""
    h = hashlib.sha256()
    for root in ANALYSIS:
        for f in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (".py", ".j2")):
            h.update(str(f.relative_to(ROOT)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def screenshot(page: Path, out: Path, width: int = PHONE_WIDTH, height: int = 2400) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("chromium is not installed (apt-get install -y chromium): no screenshot")
    with tempfile.TemporaryDirectory() as profile:
        res = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                              "--no-first-run", "--disable-background-networking", "--disable-component-update",
                              "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={profile}",
                              "--hide-scrollbars", f"--window-size={width},{height}", f"--screenshot={out}",
                              page.as_uri()], capture_output=True, text=True, timeout=120)
    if res.returncode != 0 or not out.exists():
        raise SystemExit(f"the screenshot failed: {res.stderr[-1000:]}")


def main(wall_s: float, study: str = "local", config: str = "config/local.yaml") -> None:
    report = ROOT / "reports" / study / "report.html"
    guidelines = json.loads((ROOT / "results" / study / "guidelines.json").read_text())["guidelines"]
    counts = {s: sum(g["status"] == s for g in guidelines) for s in ("advice", "inconclusive", "not_enough_data")}
    DOCS.mkdir(exist_ok=True)
    stem = "sample-report" if study == "local" else f"sample-report-{study}"
    shutil.copyfile(report, DOCS / f"{stem}.html")
    if study == "local":
        screenshot(DOCS / f"{stem}.html", DOCS / "sample-report-phone.png")
        # README's picture of the answer: the first screen of a desktop browser
        screenshot(DOCS / f"{stem}.html", DOCS / "sample-answer.png", width=1280, height=900)
    note = {
        "made_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": "make demo" + ("" if study == "local" else f" CONFIG={config}"),
        "config": config, "machine": f"{cpu_model()}, {os.cpu_count()} cores, {platform.platform()}",
        "demo_wall_s": round(wall_s), "load_average_after": round(os.getloadavg()[0], 2),
        "analysis": analysis_digest(), "guidelines": counts, "advice": [g["id"] for g in guidelines if g["status"] == "advice"],
    }
    (DOCS / f"{stem}.json").write_text(json.dumps(note, indent=1) + "\n")
    stamp_wall_time(study, round(wall_s))
    print(json.dumps(note, indent=1))


def wall_text(seconds: int) -> str:
    """'96 s', '3 min 17 s': how the docs say a run's wall time."""
    return f"{seconds} s" if seconds < 60 else f"{seconds // 60} min {seconds % 60} s"


def stamp_wall_time(study: str, seconds: int) -> None:
    """The docs' timing of this study, between <!-- wall:STUDY --> and <!-- /wall -->, is the sample's
    own (tests/unit/test_sample_reports.py holds them equal): a timing is never typed by hand."""
    pattern = re.compile(rf"(<!-- wall:{re.escape(study)} -->)[^<]*(<!-- /wall -->)")
    for doc in DOC_TIMINGS:
        text = doc.read_text(encoding="utf-8")
        doc.write_text(pattern.sub(lambda m: m.group(1) + wall_text(seconds) + m.group(2), text), encoding="utf-8")


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else float("nan"), *sys.argv[2:4])
