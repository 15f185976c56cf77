"""The self-contained HTML report. It answers first: a summary box (what was measured on what, the
recommended configuration, run counts, expectation verdicts), then every guideline once with its
numbers as small tables, the expectations, the comparison with other studies (report.compare),
and then the tables, inline figures (base64 PNG), law fits, the performance model (kept apart
from the measurements), method and provenance. Jinja2 with autoescape; everything the page needs
is inside the one file (no external URLs); wide tables scroll inside their own box."""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import re
from pathlib import Path

import jinja2
import yaml

from kan.contract import factory
from kan.contract.point import TrainConfig
from kan.contract.data_config import is_default_section
from kan.contract.fields import default

from ..common.columns import model_family
from ..common.fmt import plural
from ..common.settings import Settings
from ..model import linkcheck
from ..tables import heldout, queue
from ..tables import readiness_table as ready
from ..tables.target import rule_text
from . import operator
from .anatomy_section import anatomy_context
from .answer import answer_context, device_kind, imported_settle
from .cells import critical_rows, heldout_rows, table_rows, tuning_rows
from .figure_names import CRITICAL
from .figure_names import HELDOUT_PREFIX as PREFIX
from .reference import PAPER_BASELINE
from .sections import (SECTIONS, compare_context, core_table, ddp_model_rows, expectations_context, figure_entries, fit_rows,
                       guideline_groups, looks_context, matched_models, model_sections, reference_notes,
                       status_summary)
from .run_summary import measured_on, placement_text

TEMPLATES = Path(__file__).resolve().parents[3] / "report" / "templates"
SECTION_FIGURES = {"strong": ["strong_speedup", "strong_efficiency", "loss_curves"],
                   "weak": ["weak_throughput", "weak_efficiency"],
                   "comm": ["comm_exposed", "comm_throughput", "allreduce_busbw", "allreduce_time"],
                   "model_size": ["model_size_memory", "model_size_throughput"],
                   "ddp": ["ddp_time_to_target", "ddp_loss_curves"]}


def subject(tables: dict) -> str:
    """What the report is about, in its first line: 'KAN' where any model is a KAN (its MLP baselines
    beside it), else the models' own names (runs imported from elsewhere, e.g. 'bert')."""
    names = set()
    for name in ("strong", "weak", "comm", "model_size"):
        t = tables.get(name)
        if t is not None and not t.empty and "model" in t:
            names |= {model_family(m) for m in t["model"].dropna()}
    if not names or any(n.startswith(("kan", "pykan")) for n in names):
        return "KAN"
    return ", ".join(sorted(names))


def build_context(tables: dict, guidelines: list[dict], manifest: dict, figures_dir, config: dict,
                  provenance: dict, reference: dict | None = None, generated_utc: str | None = None,
                  expectations: dict | None = None, compare: list[dict] | None = None,
                  look: dict | None = None, tuning: dict | None = None, critical: dict | None = None,
                  readiness: dict | None = None) -> dict:
    reference = reference or {}
    guidelines = with_readiness_notes(guidelines, readiness)
    if (provenance or {}).get("imported"):  # every section's "To settle it", not only the answer's
        guidelines = [{**g, "settle": imported_settle(g.get("settle"))} if g.get("settle") else g
                      for g in guidelines]
    settings = Settings.from_config(config)
    sections = {}
    for name in SECTIONS:
        t = tables.get(name)
        table = table_rows(name, t)
        figures = figure_entries(manifest, figures_dir, SECTION_FIGURES[name])
        sections[name] = {"table": table, "core": core_table(name, table), "figures": figures,
                          "num_guidelines": sum(g.get("topic") == name for g in guidelines),
                          # strong and weak scaling are what every study asks: always shown, with
                          # placeholders; another section only when something of it was measured, or
                          # a guideline of its topic decided something (the exposed communication share of
                          # strong and weak points is communication overhead, with no comm experiment too)
                          "shown": name in ("strong", "weak") or bool(table["rows"])
                          or any("data_uri" in f for f in figures)
                          or any(g.get("topic") == name and g.get("status") != "not_enough_data" for g in guidelines)}
    sections["comm"]["allreduce"] = table_rows("allreduce", tables.get("allreduce_sizes"))
    sections["ddp"]["model"] = ddp_model_rows(tables.get("model"))
    fits = tables.get("fits") or {}
    study = config["study"]
    status = status_summary(tables.get("points"))
    models = model_sections(tables.get("model"), device_kind(provenance))
    notes = reference_notes(tables, reference)
    answer = {**answer_context(tables, guidelines, status, provenance), "on": placement_text(provenance)}
    guidelines = with_answer_notes(guidelines, answer["by_target"])
    return {
        "study": study,
        "subject": subject(tables),
        "generated_utc": generated_utc or dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "config_yaml": config_text(config),
        "thresholds": config["report"],
        "status": status,
        "provenance": provenance or {},
        "queue": queue.text((provenance or {}).get("queue")),
        "sections": sections,
        "guidelines_by_topic": guidelines_by_topic(guidelines),
        # an experiment the study did not plan is named once, in "What was run", not as guidelines it lacks
        "not_enough": [{**g, "slug": slug(g["id"])} for g in guidelines if g.get("status") == "not_enough_data"
                       and (sections.get(g.get("topic")) or {}).get("shown", True)],
        "answer": answer,
        "headline": next((f for f in figure_entries(manifest, figures_dir, ["headline"]) if "data_uri" in f), None),
        "measured_on": measured_on(tables.get("points"), provenance or {}),
        "looks": looks_context(look, guidelines, config["repeats"], settings),
        "expectations": expectations_context(expectations),
        "compare": compare_context({"name": study, "folder": None, "tables": tables, "provenance": provenance or {}},
                                   compare or []),
        "fit_rows": fit_rows(fits),
        "fit_method": fits.get("method") or {},
        "models": models,
        "matched_models": matched_models(config),
        "shared_compute": shared_compute(models),
        "link_check": linkcheck.report_context(tables.get("model")),
        "operator": operator.section(tables.get("strong"), tables.get("model")),
        "model_method": (tables.get("model") or {}).get("method", ""),
        "allreduce_source": (tables.get("model") or {}).get("allreduce_sweep", ""),
        "corun_source": ((tables.get("model") or {}).get("corun") or {}).get("text", ""),
        "target_rule": rule_text(settings),
        "heldout": heldout_context(config, tables),
        "accuracy": accuracy_context(config, tables, manifest, figures_dir, tuning, critical),
        "readiness": readiness_context(readiness),
        "anatomy": anatomy_context(tables.get("anatomy"), manifest, figures_dir),
        "baseline_note": baseline_note(config, notes),
        "reference_notes": notes,
        "reference_used": bool(reference),
    }


def render_report(tables: dict, guidelines: list[dict], manifest: dict, figures_dir, config: dict,
                  provenance: dict, reference: dict | None = None, generated_utc: str | None = None,
                  templates: str | Path = TEMPLATES, expectations: dict | None = None,
                  compare: list[dict] | None = None, look: dict | None = None, tuning: dict | None = None,
                  critical: dict | None = None, readiness: dict | None = None) -> str:
    """The report's HTML as a string. `expectations` = expectations.json; `compare` = other studies
    (compare.read_study), shown after this one; `look` = an adaptive study's last look file;
    `tuning` = lr_tuning.json (training.lr: tuned); `critical` = critical_batch.json; `readiness` =
    ddp_readiness.json (experiments.readiness)."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates)), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["plural"] = plural
    ctx = build_context(tables, guidelines, manifest, figures_dir, config, provenance, reference, generated_utc,
                        expectations, compare, look, tuning, critical, readiness)
    ctx["template_digest"] = template_digest(templates)
    return env.get_template("report.html.j2").render(**ctx)


def template_digest(templates: str | Path = TEMPLATES) -> str:
    """The template's fingerprint, written into every page: a sample report in docs/ made by another
    template is stale (tests/unit/test_sample_reports.py), as the workflow's render rule reruns on it."""
    return hashlib.sha256((Path(templates) / "report.html.j2").read_bytes()).hexdigest()[:16]


def shared_compute(models: list[dict]) -> str | None:
    """The compute term's text when every model carries the same one (one fit over all their points):
    said once, not once per model."""
    texts = {m["compute"] for m in models if m["compute"]}
    return texts.pop() if len(models) > 1 and len(texts) == 1 and all(m["compute"] for m in models) else None


def slug(text: str) -> str:
    """An HTML id from a guideline id: lower case, letters, digits and dashes only, so it can be linked."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9]+", "-", str(text).lower())).strip("-")


def guidelines_by_topic(guidelines: list[dict]) -> dict[str, list[dict]]:
    """{topic: guidelines with their numbers as tables}, each shown once, in its experiment's section;
    those without enough data are listed once, under the answer, instead."""
    out: dict[str, list[dict]] = {}
    for group in guideline_groups(guidelines):
        items = [{**g, "slug": slug(g["id"])} for g in group["items"] if g.get("status") != "not_enough_data"]
        if items:
            out[group["topic"]] = items
    return out


def readiness_context(found: dict | None) -> list[dict] | None:
    """"Is it ready for DDP?": each implementation's checks in words (None: no check was planned)."""
    if not found:
        return None
    word = {True: "pass", False: "fail", None: "not checked"}
    # "not ready" names the DDP checks failed: the capture check has its own row, not the badge
    return [{"name": name,
             "failed": [c["check"] for c in checks if c["pass"] is False and c["check"] != ready.CAPTURE],
             "checks": [{**c, "verdict": word[c["pass"]]} for c in checks]} for name, checks in found.items()]


def with_answer_notes(guidelines: list[dict], by_target: dict[str, str]) -> list[dict]:
    """A model the answer places by its measured time to a target: its deploy guideline (the model's
    prediction of the configured work) answers another question, and says so beside its verdict."""
    out = []
    for g in guidelines:
        model = g["id"][len("deploy-"):] if g["id"].startswith("deploy-") else None
        if model in by_target:
            g = {**g, "answer_note": f"The answer above places {model} by its measured time to "
                                     f"{by_target[model]}, not by this prediction of the configured work."}
        out.append(g)
    return out


def with_readiness_notes(guidelines: list[dict], found: dict | None) -> list[dict]:
    """Each guideline about an implementation that failed a readiness check says what it rests on."""
    bad = ready.failed_checks(found or {})
    out = []
    for g in guidelines:
        notes = [ready.drift_note(name, checks) for name, checks in bad.items() if f"{name} [" in g.get("text", "")]
        out.append({**g, "readiness_note": " ".join(notes)} if notes else g)
    return out


def heldout_context(config: dict, tables: dict) -> dict | None:
    """The held-out target in words for the strong note and the Method (None: report.target not set)."""
    target = config["report"]["target"]
    if target is None:
        return None
    return {"rule": heldout.rule_text(target, tables), "every": f"{config['training']['eval_every_samples']:,}"}


def accuracy_context(config: dict, tables: dict, manifest: dict, figures_dir, tuning: dict | None = None,
                     critical: dict | None = None) -> dict | None:
    """The "Time to accuracy" section: its figures (plots_accuracy's, drawn only where the study has
    held-out curves), with report.target the table of time and samples to it, and with tuned rates
    each implementation's sweep and choice; None: no section."""
    names = [n for n in manifest if n.startswith(PREFIX)]
    if not names:
        return None
    every = config["training"]["eval_every_samples"]
    return {"figures": figure_entries(manifest, figures_dir, names), "every": f"{every:,}" if every else "",
            "table": heldout_rows(tables) if config["report"]["target"] is not None else None,
            "tuning": tuning_rows(tuning) if tuning else None,
            "critical": critical_rows(critical) if critical else None,
            "critical_figures": figure_entries(manifest, figures_dir, [CRITICAL]) if CRITICAL in manifest else []}


# what only says how kanscale would run a point: nothing ran for imported runs, so these describe
# nothing of them (the seed report showed "launcher: torchrun" for runs launched by the paper's scripts)
NOT_IMPORTED = ("launcher", "cpu_threads_per_rank", "gpu_type", "request_gpus", "resources", "timeouts", "network",
                "limits", "plan", "partial", "rerun_failed")
NOT_IMPORTED_TRAINING = ("comm_probe_every", "loss_every_steps")


def baseline_note(config: dict, notes: dict) -> str:
    """Which baseline the seed paper's ratios use: only where its numbers are on the page (its points
    drawn in the strong section, or its own runs imported); elsewhere it explained nothing."""
    imported = config.get("import")  # absent in the tests' hand-built configs
    seed_runs = bool(imported) and imported["format"] == "seed-suite"
    return PAPER_BASELINE if seed_runs or notes.get("strong") else ""


def config_text(config: dict) -> str:
    shown = config_echo(config)
    text = yaml.safe_dump(shown, sort_keys=False, default_flow_style=None, width=100)
    if config.get("import"):
        text = (f"# imported runs: left out are the keys that say how kanscale runs a point "
                f"({', '.join(NOT_IMPORTED)}, training.{', training.'.join(NOT_IMPORTED_TRAINING)})\n" + text)
    return text


def config_echo(config: dict) -> dict:
    """The validated config as the report shows it: the data section, the validation cadence and the
    learning rate's scaling rule and the held-out target only where they are set (as a point's id has
    them), so a study from before they existed reads the same."""
    shown = copy.deepcopy(config)
    report = shown.get("report")
    if report and "target" in report and report["target"] is None:
        del report["target"]
    if "data" in shown and is_default_section(shown["data"]):
        del shown["data"]
    training = shown.get("training") or {}
    for key in ("eval_every_samples", "lr_scaling", "lr_warmup_samples"):
        if key in training and training[key] == default(TrainConfig, key):
            del training[key]
    if "lr_reference_batch" in training and training["lr_reference_batch"] is None:  # null: the one-rank batch
        del training["lr_reference_batch"]
    if "lr_candidates" in training and not (training.get("lr") == "tuned"):  # used only by lr: tuned
        del training["lr_candidates"]
    exps = shown.get("experiments") or {}
    if "readiness" in exps and exps["readiness"]["enabled"] is None and not factory.readiness_on(
            None, shown["model"]["impl"]):  # at its default no check ran
        del exps["readiness"]
    if shown.get("import"):
        for key in NOT_IMPORTED:
            shown.pop(key, None)
        for key in NOT_IMPORTED_TRAINING:
            training.pop(key, None)
        for name in [n for n, e in exps.items() if isinstance(e, dict) and e.get("enabled") is False]:
            del exps[name]  # a switched-off experiment of an import: nothing to say
    return shown
