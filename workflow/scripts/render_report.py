"""Workflow step: tables, model, figures, guidelines, expectations and provenance (of this study
and of the studies in report.compare) -> reports/<study>/report.html."""

import sys
from pathlib import Path

from scaling.common.io import read_json, read_tables, step_args, write_text
from scaling.report.compare import read_studies
from scaling.report.reference import load_reference
from scaling.report.render import render_report

TABLES = ("points", "strong", "weak", "comm", "model_size", "ddp", "allreduce_sizes", "anatomy", "fits", "model")


def main(tables: dict, figures: str, guidelines: str, provenance: str, config: dict, reference: str | None,
         out: str, expectations: str | None = None, compare: list[str] | None = None, look: str | None = None,
         tuning: str | None = None, critical: str | None = None, readiness: str | None = None) -> None:
    """`reference`: the config's report.reference name; `compare`: other studies' results folders;
    `look`: an adaptive study's last look file (None: fixed repeats, or no look yet); `tuning`:
    lr_tuning.json (None: the rate was given, or no sweep has been chosen from yet); `critical`:
    critical_batch.json (None: no batch experiment); `readiness`: ddp_readiness.json (None: no check)."""
    html = render_report(read_tables(tables), read_json(guidelines)["guidelines"],
                         read_json(Path(figures) / "figures.json"), figures, config, read_json(provenance),
                         load_reference(reference), expectations=read_json(expectations) if expectations else None,
                         compare=read_studies(compare or []), look=read_json(look) if look else None,
                         tuning=read_json(tuning) if tuning and Path(tuning).exists() else None,
                         critical=read_json(critical) if critical and Path(critical).exists() else None,
                         readiness=read_json(readiness) if readiness and Path(readiness).exists() else None)
    write_text(out, html)
    print(f"{out}: {len(html):,} bytes", file=sys.stderr)


if __name__ == "__main__":
    inp, params, out = step_args(__doc__)
    main({k: inp[k] for k in TABLES}, inp["figures"], inp["guidelines"], inp["provenance"], params["config"],
         params["reference"], out["report"], inp["expectations"], params["compare"], params["looks"],
         params.get("tuning"), params.get("critical"), params.get("readiness"))
