"""What the report's appendix says the numbers were measured on (scaling/report/run_summary.py)."""

import pandas as pd

from scaling.report.run_summary import measured_on

POINTS = pd.DataFrame({"status": ["ok", "ok", "failed"], "world_size": [1, 8, 4], "nodes": [1, 4, 2],
                       "experiment": ["strong", "strong", "weak"]})


def test_hosts_are_listed_where_recorded():
    on = dict(measured_on(POINTS, {"hostnames": ["n1", "n2"]}))
    assert on["hosts"] == "2: n1, n2" and on["world sizes measured"].startswith("1, 8")


def test_imported_runs_give_their_nodes_not_a_made_up_host():
    on = dict(measured_on(POINTS, {"hostnames": ["imported"], "imported": {"num_records": 3}}))
    assert on["hosts"] == "up to 4 nodes a run (imported: host names not recorded)"
