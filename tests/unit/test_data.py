"""The data section: Feynman formulas against hand-computed values, tables read and checked
once at plan time (each bad file one line naming the file and the column, nothing written), the
held-out split, and point ids: unchanged for the default data, changed by a file's content."""

import copy
import math

import numpy as np
import pytest

import plan
from kan.data import feynman, user_tables
from kan.contract.point import Point, PointError
from kan.data.datasets import load_data
from kan.contract.data_config import DataConfig

PI = math.pi
# (equation, inputs in the database's order, value by hand)
KNOWN = [
    ("I.6.2", (1, 1), math.exp(-0.5) / math.sqrt(2 * PI)),       # sigma=1, theta=1
    ("I.6.2b", (1, 2, 2), 1 / math.sqrt(2 * PI)),                 # theta = theta1: the peak
    ("I.12.11", (2, 1, 1, 3, PI / 2), 8.0),                       # 2 (1 + 1*3*1)
    ("I.13.12", (1, 2, 2, 1, 3), 3.0),                            # 3*1*2*(1/1 - 1/2)
    ("I.16.6", (2, 1, 1), 1.6),                                   # (1+1)/(1 + 1/4)
    ("I.18.4", (1, 3, 2, 4), 3.5),                                # (2 + 12)/4
    ("I.26.2", (0.5, PI / 2), PI / 6),                            # arcsin(1/2)
    ("I.27.6", (2, 4, 2), 1.0),                                   # 1/(1/2 + 2/4)
    ("I.29.16", (3, 4, PI / 2, 0), 5.0),                          # the 3-4-5 triangle
    ("I.30.3", (1, PI, 2), 0.0),                                  # sin^2(pi) / sin^2(pi/2)
    ("I.37.4", (1, 4, 0), 9.0),                                   # 1 + 4 + 2*2
    ("II.2.42", (2, 1, 3, 2, 4), 2.0),                            # 2*2*2/4
    ("III.17.37", (2, 1, 0), 4.0),                                # 2 (1 + 1)
]


@pytest.mark.parametrize("name, inputs, value", KNOWN, ids=[k[0] for k in KNOWN])
def test_feynman_formulas_against_known_values(name, inputs, value):
    got = feynman.evaluate(name, np.array([inputs], dtype=float))
    assert got.shape == (1,) and abs(got[0] - value) < 1e-12, got


def test_every_feynman_equation_is_tested_and_sampled_in_its_ranges():
    assert {k[0] for k in KNOWN} == set(feynman.EQUATIONS)
    for name, eq in feynman.EQUATIONS.items():
        x, y = feynman.sample(name, 500, seed=3)
        lo, hi = np.array([r[1] for r in eq.inputs]), np.array([r[2] for r in eq.inputs])
        assert x.shape == (500, len(eq.inputs)) and ((x >= lo) & (x <= hi)).all() and np.isfinite(y).all()
        x2, _ = feynman.sample(name, 500, seed=3)
        assert np.array_equal(x, x2) and not np.array_equal(x, feynman.sample(name, 500, seed=4)[0])


# ---- tables and their plan-time checks ------------------------------------------------------------

def _csv(path, header, rows):
    path.write_text(",".join(header) + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
    return path


def _good_rows(n=200, classes=2):
    rng = np.random.default_rng(0)
    return [(round(a, 4), round(b, 4), int(i % classes)) for i, (a, b) in enumerate(rng.random((n, 2)))]


def study(data: dict, widths=(2, 8, 2), global_batch=32) -> dict:
    return {"data": data, "model": {"widths": list(widths)},
            "experiments": {"strong": {"samples": 512, "global_batch": global_batch, "non_ddp_baseline": False,
                                       "topologies": [{"nodes": 1, "gpus_per_node": 2}]}}}


def test_a_csv_and_an_npz_table_read_alike(tmp_path):
    rows = _good_rows()
    f = _csv(tmp_path / "t.csv", ["a", "b", "label"], rows)
    arr = np.array(rows)
    np.savez(tmp_path / "t.npz", a=arr[:, 0], b=arr[:, 1], label=arr[:, 2].astype(int))
    for path in (f, tmp_path / "t.npz"):
        t = user_tables.read_table(DataConfig(kind="file", path=str(path), target="label", task="classification"))
        assert t.features == ("a", "b") and t.x.shape == (200, 2) and t.classes == (0, 1)
        assert np.allclose(t.x, arr[:, :2]) and list(t.y[:4]) == [0, 1, 0, 1]


def test_parquet_without_pyarrow_says_so(tmp_path):
    pytest.importorskip("pandas")
    try:
        import pyarrow  # noqa: F401
        pytest.skip("pyarrow is installed here: Parquet is read")
    except ImportError:
        pass
    f = tmp_path / "t.parquet"
    f.write_bytes(b"PAR1")
    with pytest.raises(user_tables.DataError, match=r"t\.parquet: reading Parquet needs pyarrow"):
        user_tables.read_table(DataConfig(kind="file", path=str(f), target="y"))


def test_a_good_file_plans_with_its_hash_and_absolute_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _csv(tmp_path / "t.csv", ["a", "b", "label"], _good_rows())
    cfg = plan.validate_config(study({"kind": "file", "path": "t.csv", "target": "label",
                                      "task": "classification"}))
    pts = plan.build_points(cfg)
    data = {p.data for p in pts.values() if p.experiment != "allreduce"}
    assert len(data) == 1
    (d,) = data
    assert d.path == str(tmp_path / "t.csv") and len(d.sha256) == 64 and d.classification


BAD = [  # (file name, header, rows, data section patch, study patch, the key, words the line must hold)
    ("missing.csv", None, None, {}, {}, "data.path", "data file not found"),
    ("t.csv", ["a", "b", "y"], _good_rows(), {"target": "label"}, {}, "data.path", "column 'label' (data.target)"),
    ("t.csv", ["a", "a", "label"], _good_rows(), {}, {}, "data.path",
     "column 'a' is named twice in the header (columns 1 and 2)"),
    ("t.csv", ["a", "b", "label"], _good_rows(), {"features": ["a", "c"]}, {}, "data.path", "column 'c' (data.features)"),
    ("t.csv", ["a", "b", "label"], [("x", 1, 0)] + _good_rows(), {}, {}, "data.path",
     "column 'a' has a non-numeric value 'x'"),
    ("t.csv", ["a", "b", "label"], _good_rows()[:5] + [(0.5, "", 1)] + _good_rows(), {}, {}, "data.path",
     "column 'b' has a NaN or infinite value (row 6)"),
    ("t.csv", ["a", "b", "label"], _good_rows(classes=1), {}, {}, "data.path", "column 'label' (the target) has a single class"),
    ("t.csv", ["a", "b", "label"], _good_rows(n=30), {}, {"global_batch": 32}, "experiments.strong (1x2)",
     "24 training rows (the held-out 0.2 left out) are fewer than one global batch of 32"),
    ("t.csv", ["a", "b", "label"], _good_rows(classes=3), {}, {}, "model.widths",
     "the output width 2 must be the 3 classes of column 'label'"),
    ("t.csv", ["a", "b", "label"], _good_rows(), {}, {"widths": (3, 8, 2)}, "model.widths",
     "the input width 3 must be the table's 2 feature columns (a, b)"),
]


@pytest.mark.parametrize("name, header, rows, patch, over, key, words", BAD, ids=[b[-2] + ":" + b[-1][:20] for b in BAD])
def test_a_bad_file_is_one_line_naming_file_and_column_and_nothing_is_written(
        tmp_path, monkeypatch, name, header, rows, patch, over, key, words):
    monkeypatch.chdir(tmp_path)
    if header:
        _csv(tmp_path / name, header, rows)
    before = sorted(p.name for p in tmp_path.iterdir())
    cfg = study({"kind": "file", "path": name, "target": "label", "task": "classification", **patch}, **over)
    with pytest.raises(plan.ConfigError) as e:
        plan.validate_config(copy.deepcopy(cfg), source="s.yaml")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"s.yaml: {key}:"), msg
    assert words in msg, msg
    if key.startswith("data"):
        assert str(tmp_path / name) in msg, msg  # the file, by its absolute path
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize("data, widths, key, words", [
    ({"kind": "feynman", "equations": ["I.6.2", "I.16.6"]}, (2, 8, 1), "data.equations[1]",
     "I.16.6 has 3 inputs but model.widths[0] is 2"),
    ({"kind": "feynman"}, (2, 8, 1), "data.equations", "needs at least one equation"),
    ({"kind": "synthetic", "equations": ["I.6.2"]}, (2, 8, 1), "data.equations", "only data.kind feynman"),
    ({"kind": "sklearn", "name": "wine"}, (13, 8, 2), "model.widths", "must be the 3 classes"),
    ({"kind": "sklearn"}, (2, 8, 1), "data.name", "is not one of diabetes"),
    ({"kind": "file", "target": "y"}, (2, 8, 1), "data.path", "needs a path"),
])
def test_data_config_errors_name_the_key(data, widths, key, words):
    with pytest.raises(plan.ConfigError) as e:
        plan.validate_config(study(data, widths=widths), source="s.yaml")
    assert str(e.value).startswith(f"s.yaml: {key}:") and words in str(e.value), e.value


def test_feynman_equations_are_an_axis_and_sklearn_plans():
    cfg = plan.validate_config(study({"kind": "feynman", "equations": ["I.6.2", "I.26.2"]}, widths=(2, 8, 1)))
    training = [p for p in plan.build_points(cfg).values() if p.experiment != "allreduce"]
    assert {p.data.equation for p in training} == {"I.6.2", "I.26.2"} and len(training) == 2
    cfg = plan.validate_config(study({"kind": "sklearn", "name": "diabetes"}, widths=(10, 8, 1)))
    (d,) = {p.data for p in plan.build_points(cfg).values() if p.experiment != "allreduce"}
    assert d.name == "diabetes" and not d.classification and len(d.sha256) == 64


# ---- split, standardisation, ids -----------------------------------------------------------------

def test_the_held_out_split_is_seeded_disjoint_and_rank_free():
    train, val = user_tables.split(100, 0.2, seed=7)
    assert len(val) == 20 and len(train) == 80 and not set(train) & set(val) and set(train) | set(val) == set(range(100))
    again = user_tables.split(100, 0.2, seed=7)
    assert all(np.array_equal(a, b) for a, b in zip((train, val), again))
    assert not np.array_equal(val, user_tables.split(100, 0.2, seed=8)[1])


def test_features_are_standardised_with_the_training_rows(tmp_path):
    _csv(tmp_path / "t.csv", ["a", "b", "y"], [(i, 100 + 3 * i, i % 2) for i in range(50)])
    d = DataConfig(kind="file", path=str(tmp_path / "t.csv"), target="y", task="classification")
    data = load_data(d, num_samples=500, input_dim=2, noise=0.0, seed=0)
    train_rows = 50 - user_tables.num_held_out(50, 0.2)
    x = data.x[:train_rows].double()  # the first training rows once each (row i mod the training rows)
    assert x.mean(0).abs().max() < 1e-6 and (x.std(0, unbiased=False) - 1).abs().max() < 1e-6
    assert data.x.shape == (500, 2) and data.y.dtype.is_floating_point is False and len(data.y_val) == 10


def test_default_data_leave_id_json_and_command_line_as_they_were():
    p = Point()
    assert p.data == DataConfig() and p.data.measured() == {}
    assert "data" not in p.measured() and "data" not in p.to_json()
    assert not [a for a in p.to_argv() if a.startswith("--data-")]
    assert "eval_every_samples" not in p.to_json()["train"]


def test_a_file_content_change_changes_the_id(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = _good_rows()
    _csv(tmp_path / "t.csv", ["a", "b", "label"], rows)
    cfg = study({"kind": "file", "path": "t.csv", "target": "label", "task": "classification"})
    ids = set(plan.build_points(plan.validate_config(copy.deepcopy(cfg))))
    assert ids == set(plan.build_points(plan.validate_config(copy.deepcopy(cfg))))  # same file, same ids
    _csv(tmp_path / "t.csv", ["a", "b", "label"], rows[:-1] + [(0.5, 0.5, 1)])
    changed = set(plan.build_points(plan.validate_config(copy.deepcopy(cfg))))
    assert [i for i in ids & changed if not i.startswith("allreduce")] == []  # an all-reduce has no data


def test_the_trainer_refuses_a_file_changed_since_planning(tmp_path):
    f = _csv(tmp_path / "t.csv", ["a", "b", "label"], _good_rows())
    d = DataConfig(kind="file", path=str(f), target="label", task="classification", sha256="0" * 64)
    with pytest.raises(ValueError, match="changed since the study was planned"):
        load_data(d, 100, 2, 0.0, 0)


def test_point_checks_the_widths_of_drawn_data():
    with pytest.raises(PointError, match="1 target"):
        Point(data=DataConfig(kind="feynman", equation="I.6.2"), model=Point().model.__class__(widths=(2, 8, 2)))


def test_the_shipped_real_data_config_plans(root):
    cfg = plan.load_config(root / "config" / "realdata.yaml")
    pts = [p for p in plan.build_points(cfg).values() if p.experiment != "allreduce"]
    assert pts and {(p.data.kind, p.data.name) for p in pts} == {("sklearn", "breast_cancer")}
    assert all(p.data.classification and p.model.widths[-1] == 2 and p.train.eval_every_samples for p in pts)


def test_the_schema_lists_the_equations_and_datasets_the_code_has():
    props = plan.load_schema()["properties"]["data"]["properties"]
    from kan.contract.data_config import KINDS, SKLEARN, TASKS

    assert props["equations"]["items"]["enum"] == list(feynman.EQUATIONS)
    assert props["name"]["enum"] == ["", *SKLEARN]
    assert tuple(props["kind"]["enum"]) == KINDS and tuple(props["task"]["enum"]) == TASKS
