# The get_* helpers of adaptive repeats (looks.smk has the checkpoint). Config `repeats: {min, max,
# looks, budget_rank_hours}`, scaling/decide/sequential.py: a chain of checkpoints look1 .. look<K-1>. Look k reads the records the study has asked for so far
# (repeats below `min`, plus what looks 1 .. k-1 added), computes every guideline and adds repeats
# only where one is undecided; Snakemake re-plans the DAG after each look, so one `snakemake`
# command runs the whole study, locally and on Slurm. The report is look K. With fixed repeats
# (or looks: 1) there is no look: LAST_LOOK = 0.
LAST_LOOK = REPEATS.num_looks - 1


def requested_ids(after_look):
    """Point ids the study asks for once look `after_look` has run (0: the first `min` repeats)."""
    if after_look == 0:
        return plan.initial_points(config, POINTS)
    path = checkpoints.look.get(study=STUDY, k=after_look).output.look
    requested = json.loads(Path(path).read_text())["requested"]
    return [pid for pid, p in POINTS.items() if p.rep < requested.get(p.family, REPEATS.min)]


def look_file(k):
    return f"results/{STUDY}/looks/look{k}.json"


def get_look_records(wildcards):
    return records_of(measured_ids(int(wildcards.k) - 1))


def get_look_benchmarks(wildcards):
    return [f"{BENCHMARKS_DIR}/{pid}.tsv" for pid in measured_ids(int(wildcards.k) - 1)]


def get_previous_look(wildcards):
    k = int(wildcards.k)
    return [look_file(k - 1)] if k > 1 else []


def get_last_look(wildcards):
    """The last look's file as an input of the analysis (none with fixed repeats or in a partial
    report, which reads whatever look files exist: get_last_look_path)."""
    return [look_file(LAST_LOOK)] if LAST_LOOK and not PARTIAL else []


def get_last_look_path(wildcards):
    """JSON: the look file whose requested repeats the analysis lists (null: the first `min` of each)."""
    if not LAST_LOOK:
        return as_json(None)
    if not PARTIAL:
        return as_json(look_file(LAST_LOOK))
    done = [k for k in range(LAST_LOOK, 0, -1) if Path(look_file(k)).exists()]
    return as_json(look_file(done[0]) if done else None)


def get_repeats(wildcards):
    return as_json(REPEATS.to_json())
