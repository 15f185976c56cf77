"""How a number reads across the report (scaling/common/fmt.py): significant digits without
e-notation, intervals only where they have a width, floors for quantities that cannot go below them,
counts with their noun in the right number, one cost unit per device."""

import pytest
from scaling.common.fmt import band, cost, interval, plural, sig, zero_width


@pytest.mark.parametrize("x, digits, text", [
    (12288.0, 4, "12,288"), (12290.4, 3, "12,290"), (52.26, 3, "52.3"), (2.91e-05, 2, "0.000029"),
    (99.96, 3, "100"), (0.0, 3, "0"), (-0.0123, 2, "-0.012"), (2.67e7, 3, "26,700,000"), (None, 3, "–"),
    (float("nan"), 3, "–"), (float("inf"), 3, "∞")])
def test_significant_digits_never_in_e_notation(x, digits, text):
    assert sig(x, digits) == text
    assert "e+" not in sig(x, digits) and "e-" not in sig(x, digits)


def test_an_interval_without_width_is_not_printed():
    assert interval(1.0, 1.0, 1.0, 100, "%") == "100%"  # the baseline's efficiency: exact
    assert interval(96.0, 96.0, 96.0) == "96"
    assert interval(0.105, 0.105 * (1 + 1e-12), 0.105, 1e3, " ms") == "105 ms"
    assert zero_width(None, 3.0) and zero_width(2.0, 2.0) and not zero_width(2.0, 2.1)


def test_a_narrow_interval_gets_the_digits_that_tell_its_ends_apart():
    # the seed's measured 114 ms step over 3 repeats: not "114 [114, 114]"
    assert interval(0.11423, 0.11391, 0.11455, 1e3, " ms") == "114.23 [113.91, 114.55] ms"
    assert interval(0.78, 0.779, 0.781, 100, "%") == "78.00% [77.90%, 78.10%]"


def test_a_share_or_a_time_keeps_its_floor():
    assert interval(0.268, -0.102, 0.639, 100, "%", floor=0.0) == "27% [0%, 64%]"
    assert band({"value": 2.0, "lo": -1.0, "hi": 3.0}, floor=0.0) == "2.0 [0, 3.0]"
    assert band(None) == "–" and band({"value": 5.0, "lo": None, "hi": None}) == "5"


def test_counts_and_costs_in_words():
    assert plural(1, "point") == "1 point" and plural(3, "point") == "3 points"
    assert plural(2, "look") == "2 looks" and plural(1, "time", "times") == "1 time"
    assert plural(1200, "sample") == "1,200 samples"
    assert cost(2.5, "GPU") == "2.5 GPU-hours" and cost(2.91e-5, "CPU") == "0.000029 rank-hours"
    assert cost(None, "GPU") == "–"


def test_an_estimate_reads_alike_wherever_it_is_said():
    from scaling.common.fmt import about, error_text
    assert about(896.4) == "900" and about(51.0) == "51" and about(12345) == "12,000" and about(0.0123) == "0.012"
    assert [error_text(x) for x in (0.49, 9.84, 12.4, None)] == ["0.49%", "9.8%", "12%", "not validated"]


def test_an_interval_may_name_its_level():
    assert interval(0.345, 0.248, 0.480, 100, "%", floor=0.0, level="98.3%") == "34% [98.3% CI 25%, 48%]"
    assert interval(96.0, 96.0, 96.0, level="95%") == "96"  # no interval, no level
