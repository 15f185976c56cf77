"""The placement classes by name: where a point's ranks sat. Standard library only: the planner
validates a config against them, and every snakemake start imports the planner (columns.py, which
needs pandas, re-exports them for the analysis)."""

SINGLE = "single-rank"
INTRA = "intra-node"
INTER = "inter-node"
SIMULATED = "simulated inter-node (one host)"
PLACEMENTS = (SINGLE, INTRA, INTER, SIMULATED)
