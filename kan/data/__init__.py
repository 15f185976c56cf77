"""A point's data, seeded and without downloads.

    datasets.py     load_data (synthetic, Feynman, a file or a sklearn table, with held-out rows),
                    per-rank sharding
    feynman.py      Feynman equations as regression tasks (data.kind feynman)
    user_tables.py  a table of features and a target: read, checked, split and standardised

What a point trains on is said in kan/contract/data_config.py; this package turns it into tensors.
"""
