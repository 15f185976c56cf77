"""A study's repeats: fixed, or adaptive with looks (the analysis's decide/sequential.py says how the
looks decide).
No pandas or scipy here: the Snakefile reads this when it loads."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .point import Point


@dataclass(frozen=True, kw_only=True)
class RepeatPlan:
    """The study's repeats: `min` always, up to `max` where a look asks for them; `alpha` is the
    config's report.alpha (no default here: the schema states it)."""

    min: int
    max: int
    looks: int = 1
    budget_rank_hours: float | None = None
    alpha: float

    @classmethod
    def from_config(cls, repeats, alpha: float) -> RepeatPlan:
        """From the config's `repeats` (an integer, or the mapping) and report.alpha."""
        if isinstance(repeats, int):
            return cls(min=repeats, max=repeats, looks=1, alpha=alpha)
        return cls(min=repeats["min"], max=repeats["max"], looks=repeats["looks"],
                   budget_rank_hours=repeats.get("budget_rank_hours"), alpha=alpha)

    @property
    def adaptive(self) -> bool:
        return self.looks > 1 and self.max > self.min

    @property
    def num_looks(self) -> int:
        """K: the looks that decide, the report's included (1 with fixed repeats)."""
        return self.looks if self.adaptive else 1

    @property
    def level(self) -> float:
        """The deciding intervals' level, 1 - alpha / K."""
        return 1 - self.alpha / self.num_looks

    def to_json(self) -> dict:
        return {**asdict(self), "adaptive": self.adaptive, "decision_level": self.level}

    @classmethod
    def from_json(cls, d: dict) -> RepeatPlan:
        return cls(**{f: d[f] for f in ("min", "max", "looks", "budget_rank_hours", "alpha")})


def next_batch(need: int | None, n_requested: int, plan: RepeatPlan) -> int:
    """Repeats to add to a configuration that has `n_requested` and whose guidelines ask for `need`
    more: the request capped by max (None: it sits on the threshold, no number decides it)."""
    if need is None or need <= 0:
        return 0
    return max(0, min(need, plan.max - n_requested))


def requested_points(planned: list[dict], requested: dict[str, int], plan: RepeatPlan) -> list[dict]:
    """The planned points (Point.to_json) a study has asked for: per family, its first `requested`
    repeats (plan.min for a family no look has named)."""
    return [p for p in planned if p["rep"] < requested.get(Point.from_json(p).family, plan.min)]
