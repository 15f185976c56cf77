"""Re-runs: what a point's record file says (missing, corrupt, or its status), the Snakemake param
that re-runs exactly the points that should run again, and the rules a report-only run may run.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from kan.contract import record as records

# what a record file says (missing, corrupt, or its status): the contract's one classification
record_state = records.state

# the rules that turn records into the report (what `make report` may run; never measure_point)
ANALYSIS_RULES = ("write_plan", "collect_measurements", "compute_tables", "fit_model", "compute_guidelines",
                  "plot_figures", "evaluate_expectations", "render_report", "all")


def retry_token(record_path: str | Path, rerun_failed: bool) -> str:
    """A Snakemake param that changes exactly when a point should run again although its record
    exists: Snakemake re-runs a job whose params differ from the ones it last ran with.
    - no record yet, or an ok record: the token the record was written with ("" at first), so
      finished points never re-run;
    - an invalid record (empty, truncated, hand-edited, another point's): a token naming its bytes,
      always re-run;
    - a failed/oom/timeout/cancelled/killed record (and rerun_failed, the config key): a token
      naming that attempt."""
    path = Path(record_path)
    state, rec = record_state(path)
    if state == "missing":
        return ""
    if state == "corrupt":
        try:
            digest = hashlib.sha1(path.read_bytes()).hexdigest()[:12]
        except OSError:
            digest = "unreadable"
        return f"retry-after-corrupt-{digest}"
    launch = rec.get("launch") or {}
    if rerun_failed and state != "ok":
        return f"retry-after-{state}-{rec['finished_utc']}-{launch.get('attempt', '')}"
    return str(launch.get("retry_token") or "")
