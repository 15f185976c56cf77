"""Report rendering from hand-built tables (no Snakemake): sections, escaping, self-containedness, the
summary that answers first, each guideline once with its numbers as tables, expectations and a
comparison of two studies."""

import json
import re

import pytest
from report_fixture import EXPECT, PROVENANCE, render, study_tables
from scaling.report.cells import cell_text
from scaling.report.plots import FIGURES
from scaling_data import frame, row

SECTIONS = ("summary", "guidelines", "expectations", "run", "strong", "weak", "comm", "model_size", "model",
            "method")
NUM_FIGURES = len(FIGURES)  # one panel per image: speedup, efficiency, loss, weak x2, comm x2, all-reduce x2, size x2


def section(html: str, sid: str) -> str:
    return re.search(rf'<section id="{sid}">(.*?)</section>', html, re.S).group(1)


@pytest.fixture(scope="module")
def html(tmp_path_factory):
    return render(tmp_path_factory.mktemp("report"), expect=EXPECT)


def test_sections_present_summary_first(html):
    for sid in SECTIONS:
        assert f'<section id="{sid}">' in html
    order = [html.index(f'<section id="{sid}">') for sid in SECTIONS]
    assert order == sorted(order) and html.index("<section") == order[0]
    assert 'class="guideline advice"' in html
    assert "largest world size with strong-scaling efficiency" in html


def test_summary_answers_first(html):
    s = section(html, "summary")
    # what was measured on what
    for label in ("devices", "hosts", "backend", "world sizes measured", "runs (point × repeat)"):
        assert f"<th>{label}</th>" in s
    assert "1, 2, 4" in s and "24 planned, 22 ok" in s
    # run counts: one failed, one missing, and cards for pending / running / corrupt
    for card, n in (("ok", 22), ("failed", 1), ("missing", 1), ("pending", 0), ("running", 0), ("corrupt", 0)):
        assert re.search(rf'class="card card-{card}">{card}<b[^>]*>{n}</b>', s), card
    # the recommendation with its numbers, not advice while the model is not validated everywhere
    assert "fastest with predicted efficiency ≥ 75%" in s and "fewest GPU-hours" in s
    assert "inconclusive: not advice" in s and "To settle it" in s
    # expectation verdicts
    assert "1 pass" in s and "1 fail" in s and "1 inconclusive" in s and "1 not measured" in s


def test_each_guideline_once_with_numbers_as_tables(html):
    ids = re.findall(r'id="guideline-([^"]+)"', html)
    assert ids and len(ids) == len(set(ids))
    texts = re.findall(r'<div class="guideline [a-z_]+" id="guideline-[^"]+">\s*<div class="text">(.*?)</div>', html, re.S)
    for t in texts:
        assert html.count(t) == 1, t[:80]
    g = section(html, "guidelines")
    assert 'class="numbers"' in g and "<code>{" not in g and '{"' not in g and "&#34;" not in g
    # the strong-efficiency guideline's per-world-size numbers: one table, world sizes as columns
    assert re.search(r"<th>world size</th><th>1</th><th>2</th><th>4</th>", g)
    assert "<td>efficiency</td><td>100.0%</td><td>90.0%</td><td>60.0%</td>" in g
    # sections point to the guidelines instead of repeating them
    assert 'href="#guidelines-strong"' in section(html, "strong")


def test_baseline_ratio_is_exact(html):
    strong = section(html, "strong")
    assert "1.00 (baseline)" in strong and "100.0% (baseline)" in strong


def test_expectations_table(html):
    e = section(html, "expectations")
    for status in ("pass", "fail", "inconclusive", "not measured"):
        assert f"<b>{status}</b>" in e
    assert "check_expectations.py results/handbuilt/expectations.json" in e
    assert "no measured row matches the selectors" in e  # weak efficiency at 8 ranks was not measured


def test_autoescape(html):
    # a failure reason and a hostname containing markup appear escaped, never as live markup
    assert "<script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "node&lt;1&gt;" in html


def test_self_contained(html):
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "<link" not in html and "@import" not in html
    imgs = re.findall(r'<img src="([^"]+)"', html)
    assert len(imgs) == NUM_FIGURES and all(src.startswith("data:image/png;base64,") for src in imgs)


def test_counts_provenance_and_reference(html):
    assert "Runs that did not succeed" in html and "no record" in html
    assert "4242" in html and "9ede84170b6b (dirty)" in html
    assert "Seed paper (A100, pykan)" in html or "seed paper (a100, pykan)" in html.lower()


def test_missing_data_become_placeholders(tmp_path):
    df = frame([row("strong", 1, 1, status="failed", reason="oom"), row("weak", 1, 1, status="missing")])
    out = render(tmp_path, df)
    assert "<img" not in out
    assert out.count('class="placeholder figure-missing"') == NUM_FIGURES
    assert "Not enough data" in out
    assert '<section id="expectations">' not in out and "None configured" in out
    for sid in ("summary", "strong", "weak", "comm", "model_size", "guidelines"):
        assert f'<section id="{sid}">' in out


def test_fits_model_and_time_to_target_sections(html):
    # strong: 3 world sizes -> fitted; weak: 2 -> the exact refusal
    assert "Scaling-law fits (a model, not a measurement)" in html and "σ at its lower bound 0" in html
    assert "not enough world sizes to fit (have 2, need 3)" in html
    model = section(html, "model")
    assert "predictions, not measurements" in model and "Model error: LOO MAPE" in model
    assert 'class="data model-predictions"' in model and "extrapolated" in model
    assert "model-predictions" not in section(html, "strong")
    assert "time to target s" in html and "1.5 × the final training loss" in html
    assert "All-reduce sweep (busbw)" in html and 'id="table-allreduce"' in html
    assert "efficiency vs non-DDP" in html and "non-DDP 1-GPU run" in html
    assert "Seed-paper overlay off" in html  # the hand-built study is not the paper's workload


def test_no_nan_cells(html):
    # an empty CSV cell reads back as NaN; it must render as empty text or a dash, never "nan"
    assert ">nan<" not in html.lower().replace(" ", "")
    assert cell_text(float("nan")) == "" and cell_text(None) == "" and cell_text("x") == "x"


def test_comparison_of_two_studies(tmp_path):
    other = {"name": "cluster-b", "folder": "results/cluster-b", "tables": study_tables(scale=0.8),
             "provenance": {**PROVENANCE, "device_names": ["NVIDIA H100 80GB"], "hostnames": ["b1", "b2"]}}
    out = render(tmp_path, compare=[other])
    c = section(out, "compare")
    assert "<th>handbuilt</th><th>cluster-b</th><th>Δ cluster-b</th>" in c
    # throughput 20% lower at every common placement, the intervals apart; efficiency unchanged
    assert c.count("-20.0%") >= 3 and "intervals apart" in c
    assert re.search(r"strong: efficiency</td><td class=\"text\">kan-bspline \[2,64,1\] 1x4 \(largest common", c)
    assert "NVIDIA H100 80GB" in c and "results/cluster-b" in c
    assert "compared with cluster-b" in out
    # every figure drawn with both studies, one colour each; the manifest says so
    manifest = json.loads((tmp_path / "plots" / "figures.json").read_text())
    assert all("file" in manifest[f] for f in FIGURES)
    assert "Colours: studies." in manifest["comm_exposed"]["caption"]
