"""The names of figures the report looks up in the manifest, apart from the modules that draw them:
those import matplotlib and seaborn (0.6 s of CPU a process), which render_report does not need."""

ANATOMY_PREFIX = "anatomy_"  # plots_anatomy.py: one figure per anatomy point
HELDOUT_PREFIX = "heldout_"  # plots_accuracy.py: held-out curves, one per experiment
CRITICAL = "critical_batch"  # plots_accuracy.py: samples to target against the global batch
