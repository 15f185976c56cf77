"""The analysis is a function of the records: committed point records (tests/golden/<study>/records,
a real `make demo` run's) rebuilt by today's code give, file by file, the tables, model.json,
guidelines.json and report.html that the code of the day they were recorded gave
(tests/golden/<study>/expected). A refactor that changes any figure, word or pixel fails here.

To record a new golden on purpose (the analysis is meant to change): `python tests/golden/analysis.py
tests/golden/<study> tests/golden/<study>/expected`, and say in the commit what changed and why."""

import difflib
from pathlib import Path

import pytest

from golden.analysis import GOLDEN_FILES, rebuild

pytestmark = pytest.mark.e2e
GOLDEN = Path(__file__).resolve().parents[1] / "golden"
STUDIES = sorted(p.name for p in GOLDEN.iterdir() if (p / "expected").is_dir())


@pytest.mark.parametrize("study", STUDIES)
def test_analysis_of_committed_records_is_unchanged(study, tmp_path):
    rebuild(GOLDEN / study, tmp_path)
    changed = []
    for name in GOLDEN_FILES:
        want = (GOLDEN / study / "expected" / name).read_text()
        got = (tmp_path / name).read_text()
        if got != want:
            diff = difflib.unified_diff(want.splitlines(), got.splitlines(), "expected", "now", n=1, lineterm="")
            changed.append(f"{name}:\n" + "\n".join(line[:200] for line in list(diff)[:12]))
    assert not changed, "the analysis of the same records changed:\n" + "\n\n".join(changed)
