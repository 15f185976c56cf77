"""The analysis is a function of the records: committed point records (tests/golden/<study>/records,
a real `make demo` run's) rebuilt by today's code give, file by file, the tables, model.json,
guidelines.json and report.html that the code of the day they were recorded gave
(tests/golden/<study>/expected). A refactor that changes any figure, word or pixel fails here (a JSON
number only when it moves beyond the float noise of one CPU's BLAS against another's).

To record a new golden on purpose (the analysis is meant to change): `python tests/golden/analysis.py
tests/golden/<study> tests/golden/<study>/expected`, and say in the commit what changed and why."""

import difflib
import json
import math
from pathlib import Path

import pytest

from golden.analysis import GOLDEN_FILES, rebuild

pytestmark = pytest.mark.e2e
GOLDEN = Path(__file__).resolve().parents[1] / "golden"
STUDIES = sorted(p.name for p in GOLDEN.iterdir() if (p / "expected").is_dir())


# a JSON number may differ in its last digits from one CPU to another (the least-squares fits and
# their bootstrap run through BLAS kernels chosen by the CPU: 4.27e-19 against 4.25e-19 for a
# parameter at its bound 0, 5e-9 relative for a fitted time); every other difference is a change
REL, ABS = 1e-6, 1e-12


def same_json(a, b, path="") -> list[str]:
    """The paths where two parsed JSON documents differ beyond float noise ([] when they agree)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{path}: keys {sorted(set(a) ^ set(b))}"]
        return [d for k in a for d in same_json(a[k], b[k], f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items, now {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in same_json(x, y, f"{path}[{i}]")]
    if isinstance(a, float) and isinstance(b, float) and not isinstance(a, bool):
        return [] if math.isclose(a, b, rel_tol=REL, abs_tol=ABS) else [f"{path}: {a!r}, now {b!r}"]
    return [] if a == b else [f"{path}: {a!r}, now {b!r}"]


def test_float_noise_is_not_a_change_and_anything_else_is():
    assert same_json({"v": 4.265076615643604e-19, "t": 0.000183524895693834},
                     {"v": 4.247831546887226e-19, "t": 0.0001835248946947409}) == []
    assert same_json({"v": 0.1834}, {"v": 0.1835}) == [".v: 0.1834, now 0.1835"]
    assert same_json({"s": "advice", "n": [1, 2]}, {"s": "inconclusive", "n": [1, 2]}) == [".s: 'advice', now 'inconclusive'"]


@pytest.mark.parametrize("study", STUDIES)
def test_analysis_of_committed_records_is_unchanged(study, tmp_path):
    rebuild(GOLDEN / study, tmp_path)
    changed = []
    for name in GOLDEN_FILES:
        want = (GOLDEN / study / "expected" / name).read_text()
        got = (tmp_path / name).read_text()
        if name.endswith(".json") and got != want and not same_json(json.loads(want), json.loads(got)):
            continue  # the same numbers up to the CPU's float noise
        if got != want:
            diff = difflib.unified_diff(want.splitlines(), got.splitlines(), "expected", "now", n=1, lineterm="")
            changed.append(f"{name}:\n" + "\n".join(line[:200] for line in list(diff)[:12]))
    assert not changed, "the analysis of the same records changed:\n" + "\n\n".join(changed)
