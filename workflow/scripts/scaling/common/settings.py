"""The report's thresholds as one object, built once per workflow step and passed down to every
stage: tables, model, guidelines, figures, report.

The values come from the validated config (plan.validate_config fills in the schema's defaults):
its `report` section without the keys that are no threshold (the seed-paper reference, the compared
studies, the expectations), plus the deciding intervals' level and the number of looks, which the
repeats decide (kan/contract/repeats.py). The rules pass exactly that as the `thresholds` param
(workflow/rules/common_report.smk, get_thresholds). No default is stated here: every field is
required, so a key the config lacks fails loudly instead of falling back to a second copy of the
schema's default (workflow/schemas/config.schema.yaml holds them all).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kan.contract.repeats import RepeatPlan

# report keys that are no threshold of the analysis (each reaches the steps that read it on its own)
NOT_THRESHOLDS = ("reference", "compare", "expect")
_KINDS = {"float": float, "int": int, "float | None": float, "dict | None": dict, "str | list | None": lambda v: v}


@dataclass(frozen=True, kw_only=True)
class Settings:
    """The thresholds of the analysis (each field is the config key `report.<name>` unless noted)."""

    efficiency_threshold: float  # largest world size whose efficiency stays at or above this
    inter_node_penalty_pct: float  # inter-node placement flagged above this % loss vs intra-node
    comm_share_pct: float  # points flagged whose exposed communication exceeds this % of a step
    min_repeats: int  # a guideline resting on fewer ok repeats is inconclusive
    alpha: float  # the guidelines' overall false-decision rate
    target_loss: float | None  # fixed target loss, or None: target_loss_factor x a baseline's final loss
    target_loss_factor: float
    target: dict | None  # a held-out target {metric, value | from_reference} (tables/heldout.py), or None: off
    ddp_loss_tolerance_pct: float  # DDP-settings guideline: final loss at most this % above `none`
    predict_max_factor: float  # the model predicts up to this many times the largest measured world size
    max_gpus_per_node: int  # largest node the model predicts intra-node placements for
    model_max_mape_pct: float  # a recommendation whose model errs more (LOO MAPE) is inconclusive
    bootstrap_samples: int  # bootstrap resamples of the law fits and the performance model
    holdout: str | list | None  # placements the model predicts without them: "largest", world sizes, "NxG"; None: off
    decision_level: float  # not a config key: the deciding intervals' level, 1 - alpha / looks
    looks: int  # not a config key: the looks that decide (1 with fixed repeats)

    def __post_init__(self) -> None:
        # JSON and YAML give 10 for 10.0: each value as its field's type, as the tables and
        # guidelines.json have always shown it
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v is not None:
                object.__setattr__(self, f.name, _KINDS[f.type](v))

    @classmethod
    def from_thresholds(cls, thresholds: dict) -> Settings:
        """From a step's `thresholds` param: every field, nothing else (ValueError naming the keys)."""
        names = [f.name for f in dataclasses.fields(cls)]
        missing = [k for k in names if k not in thresholds]
        unknown = [k for k in thresholds if k not in names]
        if missing or unknown:
            raise ValueError(f"thresholds: {'missing ' + ', '.join(missing) if missing else ''}"
                             f"{'; ' if missing and unknown else ''}{'unknown ' + ', '.join(unknown) if unknown else ''}"
                             f" (expected the validated config's report section without "
                             f"{', '.join(NOT_THRESHOLDS)}, plus decision_level and looks)")
        return cls(**thresholds)

    @classmethod
    def from_config(cls, config: dict) -> Settings:
        """From a whole validated config: its report section and its repeats."""
        report = config["report"]
        plan = RepeatPlan.from_config(config["repeats"], report["alpha"])
        section = {k: v for k, v in report.items() if k not in NOT_THRESHOLDS}
        return cls.from_thresholds({**section, "decision_level": plan.level, "looks": plan.num_looks})
