"""Report rendering from hand-built tables (no Snakemake): sections, escaping, self-containedness, the
answer first (one sentence and one table row per model, the runs on one line), every other section
folded, each guideline once in its experiment's section with its numbers as tables, expectations
and a comparison of two studies."""

import json
import re

import pytest
from report_fixture import EXPECT, PROVENANCE, render, study_tables
from scaling.report.cells import cell_text
from scaling.report.plots import FIGURES
from scaling.report.render import SECTION_FIGURES
from scaling_data import frame, row

SECTIONS = ("answer", "expectations", "strong", "weak", "comm", "model_size", "model", "run", "method", "terms")
NUM_FIGURES = len(FIGURES)  # one panel per image: speedup, efficiency, loss, weak x2, comm x2, all-reduce x2, size x2


def opening(sid: str) -> str:
    return f'<section id="{sid}">' if sid == "answer" else f'<section id="{sid}"><details class="fold">'


def section(html: str, sid: str) -> str:
    return re.search(rf'{re.escape(opening(sid))}(.*?)</section>', html, re.S).group(1)


@pytest.fixture(scope="module")
def html(tmp_path_factory):
    return render(tmp_path_factory.mktemp("report"), expect=EXPECT)


def test_sections_present_answer_first(html):
    for sid in SECTIONS:
        assert opening(sid) in html, sid
    order = [html.index(opening(sid)) for sid in SECTIONS]
    assert order == sorted(order) and html.index("<section") == order[0]
    # everything but the answer is folded: one click away, closed as shipped
    assert html.count('<details class="fold">') == html.count("<section") - 1
    assert "<details open" not in html
    assert 'class="guideline advice"' in html
    assert "largest world size with strong-scaling efficiency" in html


def test_answer_first(html):
    a = section(html, "answer")
    # the runs on one line, a tile only for what did not succeed
    assert "22 of 24 runs ok" in a
    assert re.search(r'class="badge fail" href="#run">1 failed</a>', a)
    assert re.search(r'class="badge inconclusive" href="#run">1 missing</a>', a)
    assert "pending" not in a and "corrupt" not in a
    # one sentence per model: where to run, what it takes there, why; inconclusive says what settles it
    li = re.findall(r'<li class="answer answer-([a-z_]+)">(.*?)</li>', a, re.S)
    assert len(li) == 1 and li[0][0] == "inconclusive"
    assert "kan-bspline [2,64,1]: run on 1 node x 2 CPU ranks: predicted" in li[0][1]
    assert "Why: at 4 ranks a step keeps only 60% [" in li[0][1] and "Not advice yet:" in li[0][1]
    # one answer table, one row per model, its numbers rounded to their intervals
    t = re.search(r'<table id="answer-table">(.*?)</table>', a, re.S).group(1)
    assert t.count("<tr>") == 2 and "1.632 [1.623, 1.644]×" in t and "rank-hours" in t and "e-0" not in t
    # no float noise: an interval never prints more digits than its width supports
    # (a cost of 0.0062 rank-hours is two significant digits: leading zeros are not noise)
    assert not re.search(r"\d\.0*[1-9]\d{3,}", a)
    # expectation verdicts and what the study cannot answer yet, in one short list without tables
    assert "1 pass" in a and "1 fail" in a and "1 inconclusive" in a and "1 not measured" in a
    assert "guidelines this study cannot give yet, and what each needs" in a and "<table" not in a.split("not-decided")[1]


def test_each_guideline_once_with_numbers_as_tables(html):
    ids = re.findall(r'id="guideline-([^"]+)"', html)
    assert ids and len(ids) == len(set(ids))
    assert all(re.fullmatch(r"[a-z0-9-]+", i) for i in ids)  # ids are slugs: linkable
    assert not re.findall(r'id="[^"]* [^"]*"', html)
    texts = re.findall(r'<div class="guideline [a-z_]+" id="guideline-[^"]+">\s*<div class="text">(.*?)</div>', html, re.S)
    for t in texts:
        assert html.count(t) == 1, t[:80]
    g = section(html, "strong")  # a guideline lives in its experiment's section
    assert 'id="guideline-strong-efficiency-kan-bspline-2-64-1"' in g
    assert 'class="numbers"' in g and "<code>{" not in g and '{"' not in g and "&#34;" not in g
    # the strong-efficiency guideline's per-world-size numbers: one table, world sizes as columns
    assert re.search(r"<th>world size</th><th>1</th><th>2</th><th>4</th>", g)
    assert "<td>efficiency</td><td>100.0%</td><td>90.0%</td><td>60.0%</td>" in g
    assert 'id="guideline-deploy-kan-bspline-2-64-1"' in section(html, "model")


def test_tables_show_their_core_columns_first(html):
    for sid in ("strong", "weak", "comm", "model_size"):
        sec = section(html, sid)
        core = re.search(rf'<table class="data core" id="core-{sid}">\s*<tr>(.*?)</tr>', sec, re.S).group(1)
        assert 3 <= core.count("<th>") <= 8, (sid, core)
        # the full table is one click away, behind a closed toggle, and says where the CSV is
        full = sec.split('<details class="all-columns">')[1]
        assert f'id="table-{sid}"' in full and f"results/handbuilt/{sid}.csv" in full
        assert full.split(f'id="table-{sid}"')[1].split("</tr>")[0].count("<th>") > core.count("<th>")
    assert "<th>efficiency vs DDP base [95% CI]</th>" in re.search(r'id="core-strong">(.*?)</table>', html, re.S).group(1)


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
    assert "<script>alert" not in html and html.count("<script>") == 1  # the report's own: open a linked section
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
    m = section(html, "method")
    assert "The seed paper's points (arXiv 2609.07740: A100, pykan) are not drawn" in m
    for label in ("devices", "hosts", "backend", "world sizes measured", "runs (point × repeat)"):
        assert f"<th>{label}</th>" in m
    assert "1, 2, 4" in m and "24 planned, 22 ok" in m


def test_missing_data_become_placeholders(tmp_path):
    df = frame([row("strong", 1, 1, status="failed", reason="oom"), row("weak", 1, 1, status="missing")])
    out = render(tmp_path, df)
    assert "<img" not in out
    # every section figure says why it is missing; the answer's headline figure is simply left out
    # (no communication or model-size point was planned: those sections are left out, said in one line)
    left_out = len(SECTION_FIGURES["comm"]) + len(SECTION_FIGURES["model_size"])
    assert out.count('class="placeholder figure-missing"') == NUM_FIGURES - 1 - left_out
    assert 'id="figure-headline"' not in out
    assert "Not planned in this study, so not in this report: communication overhead, model size." in out
    assert "guidelines this study cannot give yet, and what each needs" in out and "No answer yet" in out
    # what the unplanned experiments would decide is not listed as missing: "What was run" names them once
    missing = out[out.index('class="not-decided"'):out.index("</details>", out.index('class="not-decided"'))]
    assert "<b>memory</b>" not in missing and "<b>inter-node</b>" not in missing
    assert "<b>" in missing  # the strong and weak experiments' own are still listed
    assert 'id="expectations"' not in out
    for sid in ("answer", "strong", "weak", "method"):
        assert opening(sid) in out
    assert opening("comm") not in out and 'href="#comm"' not in out


def test_fits_model_and_time_to_target_sections(html):
    # strong: 3 world sizes -> fitted; weak: 2 -> the exact refusal
    assert "Scaling-law fits (a model, not a measurement)" in html and "σ at its lower bound 0" in html
    assert "not enough world sizes to fit (have 2, need 3)" in html
    model = section(html, "model")
    assert "Predictions, not measurements" in model and "Model error: LOO MAPE" in model
    assert 'class="data model-predictions"' in model and "extrapolates: " in model  # how far past, not a bare flag
    assert "model-predictions" not in section(html, "strong")
    assert "time to target s" in html and "1.5 × the final training loss" in html
    assert "All-reduce sweep (busbw)" in html and 'id="table-allreduce"' in html
    # the paper's baseline is said only where its points are drawn or its runs imported: not here
    assert "efficiency vs non-DDP" in html and "non-DDP 1-GPU run" not in html
    # the hand-built study is not the paper's workload: said once, in the appendix, not in every caption
    assert html.count("not the paper's workload") == 1 and "paper&#39;s workload" not in html


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


def test_the_first_line_names_what_was_measured():
    from scaling.report.render import subject
    from scaling_data import frame, row
    assert subject({"strong": frame([row("strong", 1, 1)])}) == "KAN"
    bert = frame([row("strong", 1, 1)]).assign(model="bert")
    assert subject({"strong": bert}) == "bert" and subject({}) == "KAN"


def test_exposed_communication_of_strong_points_is_shown_without_a_comm_experiment(tmp_path):
    # strong points at 1 and 2 ranks with an exposed-communication probe, three repeats each, no comm points:
    # the share's guideline decides something, so the communication section is shown to hold it
    df = frame([row("strong", 1, g, rep=r, exposed_comm_pct=(40.0 + r) if g > 1 else None)
                for g in (1, 2) for r in range(3)])
    out = render(tmp_path, df)
    assert 'id="guideline-comm-share-strong"' in section(out, "comm")
    assert "Not planned in this study, so not in this report: model size." in out


def test_a_deploy_guideline_says_when_the_answer_rests_on_a_measured_time_instead():
    from scaling.report.render import with_answer_notes
    gs = [{"id": "deploy-kan [2,8,1]", "status": "inconclusive"}, {"id": "deploy-mlp [2,8,1]", "status": "advice"},
          {"id": "strong-efficiency-kan [2,8,1]", "status": "advice"}]
    out = with_answer_notes(gs, {"kan [2,8,1]": "val_loss ≤ 0.09"})
    assert out[0]["answer_note"] == ("The answer above places kan [2,8,1] by its measured time to val_loss ≤ 0.09, "
                                     "not by this prediction of the configured work.")
    assert "answer_note" not in out[1] and "answer_note" not in out[2]


def test_terms_say_what_mlp_matched_is_in_numbers():
    """mlp_matched is named by the KAN's widths; Terms gives its own widths and parameters, as the
    trainer builds it, beside the KAN's."""
    import copy

    import plan
    from kan.contract.point import ModelConfig
    from kan.models import build_model, num_params
    from scaling.report.sections import matched_models

    cfg = plan.validate_config(copy.deepcopy({"study": "m", "model": {"impl": ["kanscale", "mlp_matched"],
                                                                       "widths": [30, 8, 1]},
                                              "experiments": {"strong": {"samples": 1024, "global_batch": 64,
                                                                         "topologies": [{"nodes": 1, "gpus_per_node": 1}]}}}))
    (line,) = matched_models(cfg)
    built = build_model(ModelConfig(impl="mlp_matched", widths=(30, 8, 1)))
    kan = build_model(ModelConfig(impl="kanscale", widths=(30, 8, 1)))
    widths = built.widths
    assert line == (f"mlp_matched [30,8,1] is the MLP [{','.join(map(str, widths))}]: {num_params(built):,} parameters, "
                    f"against the B-spline KAN's {num_params(kan):,}")
    assert matched_models({**cfg, "model": {**cfg["model"], "impl": ["kanscale"]}}) == []
