# The get_* helpers of adaptive repeats (looks.smk has the checkpoint; LAST_LOOK and
# requested_ids are in common.smk, which says what a look is).


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
