"""The analysis's settings: one object from the validated config, every report key of the schema a
field (no second default anywhere), a missing or unknown key named."""

import dataclasses

import pytest
import yaml
from scaling.common.settings import NOT_THRESHOLDS, Settings
from scaling_data import SCHEMA, schema_config, settings


def test_every_threshold_of_the_schema_is_a_field_and_nothing_else():
    report = yaml.safe_load(SCHEMA.read_text())["properties"]["report"]["properties"]
    fields = {f.name for f in dataclasses.fields(Settings)}
    assert fields == (set(report) - set(NOT_THRESHOLDS)) | {"decision_level", "looks"}


def test_the_schema_defaults_arrive_typed():
    s = settings()
    assert s.efficiency_threshold == 0.75 and s.alpha == 0.05 and s.decision_level == pytest.approx(0.95)
    # YAML's 10 is the float 10.0 a threshold always was (guidelines.json shows 10.0)
    assert isinstance(s.inter_node_penalty_pct, float) and isinstance(s.min_repeats, int) and s.looks == 1
    assert s.target_loss is None


def test_adaptive_repeats_split_alpha_over_the_looks():
    cfg = {**schema_config(alpha=0.06), "repeats": {"min": 3, "max": 9, "looks": 3}}
    s = Settings.from_config(cfg)
    assert s.looks == 3 and s.decision_level == pytest.approx(1 - 0.06 / 3)


def test_a_missing_or_unknown_key_is_named():
    th = dataclasses.asdict(settings())
    with pytest.raises(ValueError, match="missing alpha"):
        Settings.from_thresholds({k: v for k, v in th.items() if k != "alpha"})
    with pytest.raises(ValueError, match="unknown reference"):
        Settings.from_thresholds({**th, "reference": "none"})
