# rackforge — the two commands are `make lab` and `make test` (see README.md).
SHELL := /bin/bash
VENV := .venv
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
LAB_NODES ?= 3
LAB_PROFILE ?= hgx-h100-8gpu
LAB_ARGS ?=

.PHONY: setup lab lab-up lab-down lab-converge lint unit integration molecule test bench clean

setup:
	@scripts/setup.sh

## make lab: lab of simulated GPU nodes, converged with site.yml, fleet summary printed
lab: setup lab-up lab-converge

lab-up: setup
	python3 lab/lab.py up --nodes $(LAB_NODES) --profile $(LAB_PROFILE) $(LAB_ARGS)

lab-converge:
	ansible-playbook -i inventories/lab/hosts.yml site.yml
	python3 lab/summary.py reports/fleet.json

lab-down:
	python3 lab/lab.py down

lint: setup
	yamllint -s .
	ruff check .
	ruff format --check .
	python3 scripts/check_argument_specs.py
	ansible-playbook -i inventories/example/hosts.yml site.yml --syntax-check
	ansible-lint --profile production --strict

unit: setup
	pytest -q tests/unit

integration: setup
	pytest -q tests/integration

molecule: setup
	cd molecule && molecule test --all

test: lint unit integration

bench: setup
	python3 bench/run.py

clean:
	rm -rf .cache reports/*.json reports/*.md reports/*.html
