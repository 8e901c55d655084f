# mncluster: thin wrappers. Every target does its own set-up (scripts/bootstrap.sh
# installs Debian packages, .venv and the node image when missing; re-runs are fast).
SHELL := /bin/bash
.DEFAULT_GOAL := help
VENV := .venv
ACT := source $(VENV)/bin/activate &&
SCENARIO ?= default
NODES ?= 3
# How the demo's benchmark starts its ranks: slurm (srun --mpi=pmix jobs, what the
# sandbox inventory sets) or mpiexec; empty: the inventory's.
LAUNCHER ?=
# CPUs per sandbox node (podman --cpus), e.g. NODE_CPUS=0.5; empty: no cap.
NODE_CPUS ?=
# The scale benchmark (not part of `make test`): sandbox sizes and CPUs per node.
SCALE_NODES ?= 1 3 8 16
SCALE_CPUS ?= 0.5

.PHONY: help venv lint unit molecule test demo scale-bench sandbox sandbox-destroy prune clean
help:
	@echo "make demo   - sandbox cluster of $(NODES) containers + site.yml + verify + benchmark report (through Slurm; LAUNCHER=mpiexec: mpiexec)"
	@echo "make test   - the whole test suite (lint, pytest, molecule scenarios); what CI runs"
	@echo "make scale-bench SCALE_NODES=\"1 3 8 16\" SCALE_CPUS=0.5 - sandboxes of N nodes: network/verify cold, no-op site.yml; table + PNG in reports/scale-*/"
	@echo "make prune  - the controller's artifact cache and reports/: leftovers, all but the newest builds and reports"
	@echo "make lint | unit | molecule SCENARIO=<name> | sandbox | sandbox-destroy | clean"

venv:
	@bash scripts/bootstrap.sh

lint: venv
	@$(ACT) bash scripts/test.sh lint

unit: venv
	@$(ACT) bash scripts/test.sh unit

molecule: venv
	@$(ACT) molecule test -s $(SCENARIO)

test: venv
	@$(ACT) bash scripts/test.sh

demo: venv
	@$(ACT) bash scripts/demo.sh $(NODES) $(LAUNCHER)

scale-bench: venv
	@$(ACT) bash scripts/scale-bench.sh -c "$(SCALE_CPUS)" $(SCALE_NODES)

sandbox: venv
	@$(ACT) python3 scripts/playbook_runner.py playbooks/sandbox.yml -e sandbox_nodes=$(NODES) -e sandbox_node_cpus=$(NODE_CPUS)

sandbox-destroy: venv
	@$(ACT) python3 scripts/playbook_runner.py playbooks/sandbox.yml -e sandbox_state=absent

prune: venv
	@$(ACT) python3 scripts/playbook_runner.py playbooks/prune.yml

clean: sandbox-destroy
	rm -rf reports .pytest_cache .ruff_cache
