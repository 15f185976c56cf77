"""Table cells (scaling/report/cells.py): what a cell says where the number would mislead."""

from scaling.report.cells import TABLE_COLUMNS


def _cell(table: str, header: str, row: dict) -> str:
    return next(f for h, f in TABLE_COLUMNS[table] if h == header)(row)


def test_one_rank_exposes_no_communication():
    # synced less no_sync at one rank is DDP's bookkeeping: no all-reduce, so no exposed share
    one = {"world_size": 1, "exposed_comm_pct_median": 11.6, "exposed_comm_pct_mean": 11.6}
    two = {"world_size": 2, "exposed_comm_pct_median": 43.2}
    assert _cell("strong", "exposed comm % (median)", one) == "– (1 rank)"
    assert _cell("weak", "exposed comm % (median)", one) == "– (1 rank)"
    assert _cell("comm", "exposed comm % (mean [95% CI])", one) == "– (1 rank)"
    assert _cell("strong", "exposed comm % (median)", two) == "43.2"


def test_the_run_without_ddp_is_its_own_baseline():
    ratio = {"efficiency_vs_nonddp": 1.0, "efficiency_vs_nonddp_ci_lo": 0.895, "efficiency_vs_nonddp_ci_hi": 1.117}
    plain = {"world_size": 1, "ddp": False, **ratio}
    ddp_one = {"world_size": 1, "ddp": True, **ratio}
    assert _cell("strong", "efficiency vs non-DDP", plain) == "100.0% (baseline)"
    assert _cell("strong", "efficiency vs non-DDP", ddp_one) == "100.0% [89.5%, 111.7%]"
