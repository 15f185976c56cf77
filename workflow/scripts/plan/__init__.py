"""Study plan: read and validate the config once, then build every measurement point from it.

    schema.py        the schema (every key's default, bounds, description), its validator, error lines
    config.py        read_yaml (strict), validate_config, load_config (with --config), config_warnings
    checks.py        the rules the schema cannot say (one batch for strong, limits, buildable points)
    config_keys.py   config key -> kan dataclass field (CONFIG_FIELDS); launch_settings, limits
    data_section.py  the `data:` section -> kan DataConfigs; a table read and checked once, hashed
    points.py        build_points: experiments x models x topologies x links x repeats -> kan Points;
                     ddp settings that cannot run under CUDA-graph capture left out (ddp_left_out)
    runtimes.py      step-time estimates from earlier records; each point's time limit
    state.py         record_state, retry_token (which points run again), ANALYSIS_RULES
    factories.py     model.impl factories: relative paths resolved, each checked once in a child process
    imports.py       the `import:` section: runs measured elsewhere read, checked and matched to points
    packs.py         resources.pack: the points still to run, grouped by Slurm geometry into allocations
    plan_summary.py  what `make plan` prints: the study's cost at most, one line per placement

Pure Python, imported by the workflow (common.smk), `make plan` (study.py) and the tests. The
fields of a point are defined once, in kan/contract/point.py; this package only maps config keys onto
them. Below: what callers use. The modules import each other directly, never this file.
"""

from . import factories, imports, packs
from .config import _merge, config_warnings, load_config, read_yaml, validate_config
from .config_keys import CONFIG_FIELDS, launch_settings, limits, lr_candidates
from .points import (DDP_DEFAULTS, build_points, ddp_left_out, initial_points, points_digest, points_json,
                     repeat_plan)
from .runtimes import ESTIMATE_RULE, point_runtimes
from .schema import ConfigError, load_schema
from .state import ANALYSIS_RULES, record_state, retry_token

__all__ = ["ANALYSIS_RULES", "factories", "imports", "packs", "CONFIG_FIELDS", "DDP_DEFAULTS", "ESTIMATE_RULE", "ConfigError",
           "build_points", "config_warnings", "ddp_left_out", "initial_points", "launch_settings", "limits",
           "load_config", "load_schema", "point_runtimes", "points_digest", "points_json", "read_yaml",
           "record_state", "repeat_plan", "retry_token", "validate_config"]
