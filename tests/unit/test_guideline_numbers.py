"""A guideline's cited numbers as the report's small tables (scaling/report/numbers.py)."""

from scaling.report.numbers import numbers_tables


def test_scalars_and_per_world_size_mappings():
    tables = numbers_tables({"threshold": 0.75, "efficiency_by_world_size": {"2": 0.9, "4": 0.6}})
    assert tables[0] == {"headers": ["quantity", "value"], "rows": [["threshold", "75.0%"]]}
    assert tables[1] == {"headers": ["world size", "2", "4"], "rows": [["efficiency", "90.0%", "60.0%"]]}


def test_a_list_of_mappings_is_a_table_with_a_row_each():
    # the held-out points were one cell, each point's fields joined by ";" (9,000 px wide at 390 px)
    held = [{"world_size": 8, "placement_class": "inter-node", "measured_step_s": 0.148, "interval": [0.145, 0.15]},
            {"world_size": 8, "placement_class": "inter-node", "measured_step_s": 0.1461, "runs": 3}]
    (scalars, points) = numbers_tables({"efficiency_threshold": 0.75, "held_out": held})
    assert scalars["rows"] == [["efficiency threshold", "75.0%"]]
    assert points["headers"] == ["held out", "world size (ranks)", "link class", "measured step s", "interval", "runs"]
    assert points["rows"] == [["1", "8", "inter-node", "0.148", "[0.145, 0.150]", "–"],
                              ["2", "8", "inter-node", "0.146", "–", "3"]]


def test_intervals_are_labelled_at_the_decisions_level():
    numbers = {"decision_level": 0.9833333333333333, "efficiency_by_world_size": {"2": 0.21},
               "efficiency_ci_by_world_size": {"2": [0.145, 0.308]}}
    (scalars, by_size) = numbers_tables(numbers)
    assert scalars["rows"] == [["decision level", "98.3%"]]
    assert [r[0] for r in by_size["rows"]] == ["efficiency", "98.3% CI"]
    numbers["decision_level"] = 0.95
    assert [r[0] for r in numbers_tables(numbers)[1]["rows"]] == ["efficiency", "95% CI"]
