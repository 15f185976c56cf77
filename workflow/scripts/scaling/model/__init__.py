"""The performance model of one DDP training step: fitted to the tables stage's clean frames,
validated on held-out world sizes, predicting beyond them (model.json; perf_model.py describes the maths).

    terms      the ring all-reduce, bounded least squares, the compute design, cores shared by ranks
    fit        compute and communication terms, a step's prediction, leave-one-world-size-out validation
    predict    the configured work at powers of two per link class, and the recommendation
    linkcheck  the model against the emulated links, whose rate is known; their block in the report
    ddp_model  DDP's own settings predicted from their bytes per step
    placement  a step at N nodes x G GPUs a node: candidate forms, leave-one-placement-out, intervals
    placed     the placement model as model.json's engine for imported runs (no no_sync probe)
    holdout    report.holdout: fitted without some placements, the placement model predicts them (holdout.json)
    perf_model fit_performance_model: all of the above as model.json
"""
