"""What to do with the measurements: the guidelines, the looks of an adaptive study, the user's
expectations. Reads the tables stage's tables and model.json.

    rules         what every guideline shares: status, deciding interval, side of a threshold, repeats to settle
    efficiency    strong-scaling efficiency vs world size; the per-rank batch where compute falls off
    comm          multi-node vs one node at equal world size; exposed communication share of a step
    memory        peak memory vs parameters, and what fits in 16 / 40 / 80 GB
    deploy        where to run the configured work, from the performance model
    ddp_advice    which of DDP's own settings to deploy, by time to the target loss
    overhead      a DDP cost per step that is the same on and off node: said not to be communication
    stepbound     what bounds a step (dispatch, compute, all-reduce), per implementation
    accuracy      the time-to-accuracy verdict: the world size that reaches the target soonest
    totarget      time to the target at world sizes not measured (steps x the model's step time)
    guidelines    compute_guidelines: all of the above, in report order
    sequential    adaptive repeats: what one look adds, the error-rate simulation, the report's account
    expectations  report.expect: pass / fail / inconclusive against the tables
"""
