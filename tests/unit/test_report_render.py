"""Report rendering from hand-built tables (no Snakemake): sections, escaping, self-containedness."""

import re

import pytest
from report_fixture import render
from scaling_data import frame, row

SECTIONS = ("summary", "run", "strong", "weak", "comm", "model_size", "model", "method", "guidelines")
NUM_FIGURES = 7  # strong speedup, strong efficiency, loss curves, weak, comm, all-reduce, model size


@pytest.fixture(scope="module")
def html(tmp_path_factory):
    return render(tmp_path_factory.mktemp("report"))


def test_sections_present(html):
    for sid in SECTIONS:
        assert f'<section id="{sid}">' in html
    assert 'class="guideline advice"' in html
    assert "largest world size with strong-scaling efficiency" in html


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
    assert "seed paper (A100, pykan)" in html.lower() or "Seed paper (A100, pykan)" in html


def test_missing_data_become_placeholders(tmp_path):
    df = frame([row("strong", 1, 1, status="failed", reason="oom"), row("weak", 1, 1, status="missing")])
    out = render(tmp_path, df)
    assert "<img" not in out
    assert out.count('class="placeholder figure-missing"') == NUM_FIGURES
    assert "Not enough data" in out
    for sid in ("strong", "weak", "comm", "model_size", "guidelines"):
        assert f'<section id="{sid}">' in out


def test_fits_model_and_time_to_target_sections(html):
    # strong: 3 world sizes -> fitted; weak: 2 -> the exact refusal
    assert "Scaling-law fits (a model, not a measurement)" in html and "σ at its lower bound 0" in html
    assert "not enough world sizes to fit (have 2, need 3)" in html
    model = re.search(r'<section id="model">(.*?)</section>', html, re.S).group(1)
    assert "predictions, not measurements" in model and "Model error: LOO MAPE" in model
    assert 'class="data model-predictions"' in model and "extrapolated" in model
    assert "model-predictions" not in re.search(r'<section id="strong">(.*?)</section>', html, re.S).group(1)
    assert "time to target s" in html and "1.5 × the final training loss" in html
    assert "All-reduce sweep (busbw)" in html and 'id="table-allreduce"' in html
    assert "efficiency vs non-DDP" in html and "non-DDP 1-GPU run" in html
    assert "Seed-paper overlay off" in html  # the hand-built study is not the paper's workload


def test_no_nan_cells(html):
    # an empty CSV cell reads back as NaN; it must render as empty text or a dash, never "nan"
    assert ">nan<" not in html.lower().replace(" ", "")
    from scaling import render

    assert render._text(float("nan")) == "" and render._text(None) == "" and render._text("x") == "x"
