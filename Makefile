# Two commands do all set-up on a fresh machine:
#   make demo   creates .venv, runs the small local study (or CONFIG=...), prints where the report is
#   make test   creates .venv, installs what the tests need (Debian packages when root), runs them
# A study's state at any time (CONFIG selects it; none of these runs a point or takes snakemake's lock):
#   make check  CONFIG=...   validate the config
#   make plan   CONFIG=...   what it asks of the scheduler and costs at most (POINTS=1: every point too)
#   make status CONFIG=...   done / failed / running / pending, per point
#   make report CONFIG=...   reports/<study>/report.html from the records that exist now
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

CONFIG ?= config/local.yaml

.PHONY: demo sample-report test test-fast system-deps clean-results slurm-up slurm-down cluster-down check plan status report pykan-env

$(STAMP): requirements.lock pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "kanscale needs Python >= 3.11"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c requirements.lock -e '.[test]'
	@touch $@

# A checkout (and so .venv) may live under any path: CONFIG is quoted, and the tools run as
# `python -m ...`, not through .venv/bin's scripts, whose generated launchers expand a `$(...)` in it
demo: $(STAMP)
	$(BIN)/python -m snakemake --profile profiles/local --configfile '$(CONFIG)'
	@echo
	@$(BIN)/python workflow/scripts/study.py where '$(CONFIG)'

# docs/sample-report.html (+ a phone-width screenshot and a note of the machine): a fresh demo's report;
# docs/sample-report-realdata.html the same for config/realdata.yaml (tests/unit/test_sample_reports.py
# fails when either was made by another report template)
sample-report: $(STAMP)
	rm -rf results/local reports/local results/realdata reports/realdata
	@start=$$(date +%s); $(MAKE) --no-print-directory demo && \
	  $(BIN)/python workflow/scripts/sample_report.py $$(( $$(date +%s) - start )) local config/local.yaml
	@start=$$(date +%s); $(MAKE) --no-print-directory demo CONFIG=config/realdata.yaml && \
	  $(BIN)/python workflow/scripts/sample_report.py $$(( $$(date +%s) - start )) realdata config/realdata.yaml

# pykan's own environment (the workflow makes it by itself when a study lists impl: pykan)
pykan-env: .venv-pykan/.installed
.venv-pykan/.installed: workflow/envs/pykan-requirements.txt | $(STAMP)
	$(BIN)/python workflow/scripts/pykan_env.py .venv-pykan

check plan status report: $(STAMP)
	@$(BIN)/python workflow/scripts/study.py $@ '$(CONFIG)' $(if $(POINTS),$(if $(filter plan,$@),--points))

# Debian packages the tests drive for real (headless Chromium, Slurm); installed only as root
system-deps:
	@bash tests/setup-system.sh

# every test, the local Slurm's beside the unit and distributed ones (tests/run-all.sh says why);
# --durations: the slowest tests are in every CI log (CI must stay under 15 minutes on 2 cores)
test: $(STAMP) system-deps
	PY=$(BIN)/python bash tests/run-all.sh

# the unit tests only: no workflow run, no rank, no browser, no scheduler (seconds to a minute)
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not e2e and not slurm and not distributed and not browser"

# a real Slurm on this machine (munge, slurmctld, slurmd n1 + n2 with 2 fake GPUs each); root only
slurm-up:
	bash tests/slurm/slurm-local.sh install
	bash tests/slurm/slurm-local.sh start

slurm-down:
	bash tests/slurm/slurm-local.sh stop

# the emulated cluster (network.emulate): remove whatever a killed run left (namespaces, bridge,
# the processes in them, the state file); idempotent, root only. It runs in .venv, where the
# launcher that made the cluster runs (the packages are installed there, not found by path)
cluster-down: $(STAMP)
	$(BIN)/python workflow/scripts/cluster.py down-all

clean-results:
	rm -rf results reports/*/ .snakemake
