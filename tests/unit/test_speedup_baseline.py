"""The strong-scaling figures name their baseline as it ran: one DDP rank where the study has one,
else the one-rank run without DDP (runs imported without a one-rank DDP run)."""

import pandas as pd

from scaling.report.plots_scaling import baseline_words


def table(base_ddp: bool) -> pd.DataFrame:
    return pd.DataFrame({"world_size": [1, 2, 4], "ddp": [base_ddp, True, True],
                         "is_baseline": [True, False, False]})


def test_a_ddp_baseline_is_one_ddp_rank():
    assert baseline_words([table(True)], 1.0) == ("1 DDP rank", "the DDP baseline")


def test_a_baseline_without_ddp_says_so():
    assert baseline_words([table(False)], 1.0) == ("1 rank without DDP", "the baseline (1 rank without DDP)")
    # two studies side by side: "without DDP" only when every baseline ran without it
    assert baseline_words([table(False), table(True)], 1.0)[0] == "1 DDP rank"


def test_one_run_per_point_says_no_ci_in_the_title():
    from scaling.report.series import ci_title
    one = pd.DataFrame({"n_ok": [1, 1, 1]})
    three = pd.DataFrame({"n_ok": [3, 3, 1]})
    title = "Strong scaling: speedup (95% CI over repeats)"
    assert ci_title(title, [(0, one)]) == "Strong scaling: speedup (one run per point: no CI)"
    assert ci_title(title, [(0, three)]) == title and ci_title(title, [(0, one), (1, three)]) == title
    assert ci_title("Weak scaling: efficiency (95% CI)", [(0, one)]) == "Weak scaling: efficiency (one run per point: no CI)"


def test_figures_start_from_a_baseline_that_ran_without_ddp():
    from scaling.report.series import ddp_rows
    assert ddp_rows(table(False))["world_size"].tolist() == [1, 2, 4]  # the plain 1-rank run is the base
    both = pd.concat([table(True), pd.DataFrame({"world_size": [1], "ddp": [False], "is_baseline": [False]})])
    assert ddp_rows(both)["ddp"].tolist() == [True, True, True]  # a DDP base: the plain run is not drawn


def test_the_seed_overlay_names_an_implementation_only_where_it_differs():
    from scaling.report.reference import comparable

    def strong(model):
        return pd.DataFrame({"model": [model] * 2, "n_ok": [1, 1], "grid_size": [10, 10], "samples": [100000] * 2,
                             "world_size": [1, 2], "batch_per_rank": [512, 512]})
    own = comparable("strong", strong("kan-bspline [2,64,1]"))
    assert own["comparable"] and "implementation kan-bspline (paper: pykan)" in own["differs"]
    paper = comparable("strong", strong("pykan [2,64,1]"))
    assert paper["comparable"] and not any(d.startswith("implementation") for d in paper["differs"])


def test_the_paper_baseline_note_only_where_the_paper_is_on_the_page():
    from scaling.report.render import baseline_note
    measured = {"import": None}
    assert baseline_note(measured, {"strong": ""}) == ""  # a measured study without the overlay
    assert "non-DDP 1-GPU run" in baseline_note(measured, {"strong": "Seed-paper overlay shown; ..."})
    assert "non-DDP 1-GPU run" in baseline_note({"import": {"format": "seed-suite"}}, {"strong": ""})
    assert baseline_note({"import": {"format": "table"}}, {"strong": ""}) == ""
