"""Pure analysis functions (pandas, matplotlib/seaborn): imported by the workflow's thin
scripts and by the tests. Nothing here touches the `snakemake` object."""
