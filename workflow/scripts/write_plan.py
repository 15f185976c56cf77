"""Workflow step: the study config -> results/<study>/plan/points.json, every planned point as JSON
(what collect needs to list the missing and running ones). The Snakefile plans the same points from
the same config (workflow/rules/common.smk) and passes their digest: a plan that came out otherwise
here stops the run instead of hiding points."""

import sys

import plan
from scaling.common.io import step_args, write_text


def main(cfg: dict, expected: str, out: str) -> None:
    points = plan.build_points(cfg)
    if plan.points_digest(points) != expected:
        raise SystemExit(f"the planned points differ from the Snakefile's (digest {plan.points_digest(points)} "
                         f"!= {expected})")
    write_text(out, plan.points_json(points))
    print(f"{out}: {len(points)} points", file=sys.stderr)


if __name__ == "__main__":
    _, params, out = step_args(__doc__)
    main(params["config"], params["digest"], out["points"])
