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
ALWAYS = ("answer", "strong", "weak", "comm", "model_size", "model", "operator", "run", "method", "terms")
SAMPLES = {"sample-report.html": ("config/local.yaml", ()),
           "sample-report-realdata.html": ("config/realdata.yaml", ("accuracy",))}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_a_sample_report_was_made_by_todays_template(name):
    html = (DOCS / name).read_text(encoding="utf-8")
    m = re.search(r'<meta name="kanscale-template" content="([0-9a-f]+)">', html)
    assert m, f"docs/{name} carries no template fingerprint: made before it was written; run make sample-report"
    assert m.group(1) == template_digest(), (f"docs/{name} was made by another report template than today's: "
                                             "run make sample-report")


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_a_sample_report_has_every_section_for_its_config(name):
    config, extra = SAMPLES[name]
    html = (DOCS / name).read_text(encoding="utf-8")
    have = set(re.findall(r'<section id="([a-z_]+)">', html))
    missing = [s for s in ALWAYS + extra if s not in have]
    assert not missing, f"docs/{name} lacks {missing}"
    note = json.loads((DOCS / name.replace(".html", ".json")).read_text())
    assert note["config"] == config
