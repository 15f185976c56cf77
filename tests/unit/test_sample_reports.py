"""The sample reports in docs/ stay true: each was made by today's report template (the fingerprint
render.template_digest writes into every page) and holds every section that template renders for its
study's config. Remake them with `make sample-report` when this fails."""

import json
import re
from pathlib import Path

import pytest
from scaling.report.render import template_digest

DOCS = Path(__file__).resolve().parents[2] / "docs"
# sections every report has, and those a config's keys add (accuracy: a held-out target)
# (a section with nothing measured is left out: realdata plans no communication or model-size points)
ALWAYS = ("answer", "strong", "weak", "model", "operator", "run", "method", "terms")
SAMPLES = {"sample-report.html": ("config/local.yaml", ("comm", "model_size")),
           "sample-report-realdata.html": ("config/realdata.yaml", ("accuracy",))}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_a_sample_report_was_made_by_todays_template(name):
    html = (DOCS / name).read_text(encoding="utf-8")
    m = re.search(r'<meta name="kanscale-template" content="([0-9a-f]+)">', html)
    assert m, f"docs/{name} carries no template fingerprint: made before it was written; run make sample-report"
    assert m.group(1) == template_digest(), (f"docs/{name} was made by another report template than today's: "
                                             "run make sample-report")


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_a_sample_report_was_made_by_todays_analysis_code(name):
    """Content, not only the template: any change to the analysis package's sources makes a sample
    stale until it is remade, since a changed rule or number may change what it says."""
    import sys
    sys.path.insert(0, str(DOCS.parent / "workflow" / "scripts"))  # a script, not an installed module
    from sample_report import analysis_digest
    note = json.loads((DOCS / name.replace(".html", ".json")).read_text())
    assert note.get("analysis") == analysis_digest(), (
        f"docs/{name} was made by other analysis code than today's (note {note.get('analysis')}, today "
        f"{analysis_digest()}): run make sample-report, or with results/ kept, make report and "
        "workflow/scripts/sample_report.py")


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_a_sample_report_has_every_section_for_its_config(name):
    config, extra = SAMPLES[name]
    html = (DOCS / name).read_text(encoding="utf-8")
    have = set(re.findall(r'<section id="([a-z_]+)">', html))
    missing = [s for s in ALWAYS + extra if s not in have]
    assert not missing, f"docs/{name} lacks {missing}"
    note = json.loads((DOCS / name.replace(".html", ".json")).read_text())
    assert note["config"] == config


# jargon a report may use, and the Terms entry that must explain it wherever it is used
JARGON = {r"\bmlp_matched\b": "term-models", r"\[\d+(?:,\d+)+\]": "term-models", r"\balgbw\b": "term-busbw",
          r"\bbusbw\b": "term-busbw", r"\bUSL\b": "term-usl", r"\bexposure\b": "term-model-terms",
          r"α = ": "term-model-terms", r"\bc0\b": "term-model-terms", r"\bc\(k\)": "term-corun",
          r"\bnumba\b": "term-kernels", r"anatomy probe": "term-anatomy", r"rank-hours|GPU-hours": "term-cost",
          r"cpu_peak_rss": "term-rss", r"clock ratio|the clock ran": "term-clock", r"delta method": "term-delta",
          r"Karp–Flatt": "term-karp", r"LOO MAPE|model error": "term-loo", r"\bcontended\b": "term-contended"}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_term_the_report_uses_is_in_terms(name):
    from report_noise import visible_text
    html = (DOCS / name).read_text(encoding="utf-8")
    body, terms = html.split('<section id="terms">')
    text = visible_text(body)
    missing = {term for pattern, term in JARGON.items() if re.search(pattern, text) and f'id="{term}"' not in terms}
    assert not missing, f"docs/{name} uses terms that Terms does not explain: {sorted(missing)}"


def test_the_docs_quote_each_samples_own_wall_time():
    import sys
    sys.path.insert(0, str(DOCS.parent / "workflow" / "scripts"))  # a script, not an installed module
    from sample_report import DOC_TIMINGS, wall_text
    quoted = {(doc.name, m.group(1), m.group(2)) for doc in DOC_TIMINGS
              for m in re.finditer(r"<!-- wall:(\w+) -->([^<]*)<!-- /wall -->", doc.read_text(encoding="utf-8"))}
    assert {s for _, s, _ in quoted} == {"local", "realdata"}
    for doc, study, text in quoted:
        stem = "sample-report" if study == "local" else f"sample-report-{study}"
        wall = json.loads((DOCS / f"{stem}.json").read_text())["demo_wall_s"]
        assert text == wall_text(wall), f"{doc} quotes {text!r} for {study}; docs/{stem}.json says {wall} s"
