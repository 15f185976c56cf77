"""The link classes by name: which links a point's all-reduce crossed. Standard library only: the
planner validates a config against them, and every snakemake start imports the planner (the
analysis's columns.py, which needs pandas, re-exports them)."""

SINGLE = "single-rank"
INTRA = "intra-node"
INTER = "inter-node"
SIMULATED = "simulated inter-node (one host)"
PLACEMENTS = (SINGLE, INTRA, INTER, SIMULATED)
