# rackforge — the two commands are `make lab` and `make test` (see README.md).
SHELL := /bin/bash
VENV := .venv
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
LAB_NODES ?= 3
LAB_PROFILE ?= hgx-h100-8gpu
LAB_ARGS ?=

.PHONY: setup lab lab-up lab-down lab-converge lint unit test-lab integration molecule test bench clean

setup:
	@scripts/setup.sh

## make lab: lab of simulated GPU nodes, converged with site.yml, fleet summary printed
lab: setup lab-up lab-converge

lab-up: setup
	python3 lab/lab.py up --nodes $(LAB_NODES) --profile $(LAB_PROFILE) $(LAB_ARGS)

# unhealthy or failed nodes make ansible-playbook exit non-zero: the summary is printed either way
lab-converge:
	ansible-playbook -i inventories/lab/hosts.yml site.yml; rc=$$?; \
	python3 lab/summary.py reports/fleet.json; exit $$rc

lab-down:
	python3 lab/lab.py down

lint: setup
	yamllint -s .
	ruff check .
	ruff format --check .
	# library/ and module_utils/ run on the managed nodes: Python 3.8+ (ansible-core 2.19's floor)
	vermin --no-tips --target=3.8- --violations --backport ipaddress library module_utils
	python3 scripts/check_argument_specs.py
	python3 scripts/role_docs.py --check
	python3 scripts/dashboards.py --check
	python3 scripts/awx_surveys.py --check
	ansible-playbook playbooks/awx_configure.yml --syntax-check
	ansible-playbook -i inventories/example/hosts.yml playbooks/grafana.yml --syntax-check
	ansible-playbook -i inventories/example/hosts.yml site.yml --syntax-check
	ansible-lint --profile production --strict

unit: setup
	pytest -q tests/unit

# the integration suites share one lab (3 nodes: two HGX H100, one PCIe A100) instead of
# building containers per scenario; an existing lab (make lab) is reused, except the nodes made
# from another configuration (profile, faults, simulator or mirror sources), which lab.py replaces
TEST_LAB_ARGS ?= --nodes 3 --profile hgx-h100-8gpu --node-profile lab-node3=pcie-a100-4gpu

test-lab: setup
	python3 lab/lab.py up $(TEST_LAB_ARGS)

# CI shows only the end of the output: a failed run repeats its failed tasks last
molecule: test-lab
	set -o pipefail; molecule test --all 2>&1 | tee reports/molecule.log || { \
	  echo "=== molecule failed; the failed tasks (full log: reports/molecule.log) ==="; \
	  grep -a -B3 -A30 -E 'fatal: |FAILED! =>|ERROR! ' reports/molecule.log | tail -150; exit 1; }

integration: test-lab molecule
	pytest -q --durations=20 tests/integration

test: lint unit integration

## make bench: converge, no-op, health and fact-gathering times for 1, 4 and 8 lab nodes, 3 times
## each, plus the 404-interface and mitogen runs (replaces the lab's nodes; not during make test);
## writes bench/results/<time>.{json,md} and latest.{json,md}
BENCH_ARGS ?=
bench: setup
	python3 bench/bench.py $(BENCH_ARGS)

clean:
	rm -rf .cache reports/*.json reports/*.md reports/*.html reports/prometheus
