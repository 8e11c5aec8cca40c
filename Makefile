# Dev/CI entry points. Recipes stay one-liners; the logic lives in deploy/kafka/kafka.sh.
PY := .venv/bin/python
# The interpreter the venv is made from (rm -rf .venv && make venv PYTHON=/usr/bin/python3.11;
# see docs/offline.md, Conformance and benchmarks).
PYTHON ?= python3

.PHONY: venv kafka-start kafka-stop test test-js test-browser test-oracle docs-screenshots run e2e e2e-install e2e-openclaw

# Re-install only when the packaging or the C accelerator changed since the last install (stamp file).
venv: .venv/.installed
.venv/.installed: pyproject.toml setup.py streams/detection/_canonical.c
	@echo "make: installing loopwatch and its dependencies into .venv (the first time takes a minute or two; again only when the packaging changes)"
	test -x $(PY) || $(PYTHON) -m venv .venv
	$(PY) -m pip install -q -e '.[test,rocksdb]'
	touch $@

kafka-start:
	deploy/kafka/kafka.sh start

kafka-stop:
	deploy/kafka/kafka.sh stop

# The test command (README; .ci/run runs exactly this): starts the broker unless one is already up,
# runs pytest, then the install a new user makes (deploy/check-wheel.sh: wheel, fresh virtualenv,
# demo and replay) against the same broker; stops the broker only if it started it here (also on
# failure or Ctrl-C), and exits with the first failure's status.
test: venv test-js
	deploy/kafka/kafka.sh with sh -c '$(PY) -m pytest -q && deploy/check-wheel.sh "$$LOOPWATCH_KAFKA_BOOTSTRAP"'

# The OpenClaw plugin's tests, with node's own test runner (the plugin has no npm dependencies).
test-js:
	@command -v node >/dev/null || { echo "make: make test needs Node.js 20+ (node) for the OpenClaw plugin's tests (README: Two commands)" >&2; exit 1; }
	cd openclaw-plugin && node --test test/*.test.js

# The HTML report in headless Chromium (marker browser; Debian's chromium package, or LOOPWATCH_CHROMIUM):
# the pages at 100 and ~100,000 events load, draw every section and raise no script error. Not in make test.
test-browser: venv
	$(PY) -m pytest -q -m browser tests/report/test_html_browser.py $(ARGS)

# The screenshots of the HTML report in docs/img/ (bench/report_pages.py; needs Chromium as test-browser).
docs-screenshots: venv
	$(PY) bench/report_pages.py --out docs/img

# The demo: broker (started here only if none answers, on KAFKA_PORT when exported, else 9092; stopped
# again on exit), a worker on fresh topics, the example fleet, live verdicts; Ctrl-C stops.
# Options: make run ARGS='--once --rate 5'.
run: venv
	.venv/bin/loopwatch demo $(ARGS)

# The real runner CLIs (versions pinned in tests/e2e/runners.txt) from the npm registry into a cache
# folder, then the end-to-end tests (marker e2e; docs/runners/e2e.md): each runner in a scripted tool
# loop through a local fake model, the real broker, worker and gateway.
E2E_DIR ?= .work/e2e
e2e-install:
	npm install --prefix $(E2E_DIR) --no-audit --no-fund --no-update-notifier $$(cat tests/e2e/runners.txt)

e2e: venv e2e-install
	LOOPWATCH_E2E_DIR=$(abspath $(E2E_DIR)) deploy/kafka/kafka.sh with $(PY) -m pytest -q -m e2e tests/e2e $(ARGS)

# loopwatch's verdicts against OpenClaw's own loop-detection code on random scenarios (bench/difffuzz.py; marker
# oracle): needs the OpenClaw installs and Node 24 that e2e-openclaw puts under $(E2E_DIR)/openclaw, or
# LOOPWATCH_OPENCLAW_DIR / LOOPWATCH_OPENCLAW_9_DIR / LOOPWATCH_OPENCLAW_NODE. No broker. Not in make test.
OPENCLAW_E2E = $(abspath $(E2E_DIR))/openclaw
test-oracle: venv
	LOOPWATCH_OPENCLAW_DIR=$${LOOPWATCH_OPENCLAW_DIR:-$(OPENCLAW_E2E)/openclaw-2026.7.35/node_modules/openclaw} \
	LOOPWATCH_OPENCLAW_9_DIR=$${LOOPWATCH_OPENCLAW_9_DIR:-$(OPENCLAW_E2E)/openclaw-2026.9.6/node_modules/openclaw} \
	LOOPWATCH_OPENCLAW_NODE=$${LOOPWATCH_OPENCLAW_NODE:-$(OPENCLAW_E2E)/node-24.21.0/node_modules/node/bin/node} \
	$(PY) -m pytest -q -m oracle tests/test_openclaw_oracle.py $(ARGS)

# Only OpenClaw 2026.7.35 and 2026.9.6 (and Node 24; installed by the test itself into
# $(E2E_DIR)/openclaw, npm prefixes per version), with the plugin (tests/e2e/test_openclaw_e2e.py).
e2e-openclaw: venv
	LOOPWATCH_E2E_DIR=$(abspath $(E2E_DIR)) deploy/kafka/kafka.sh with $(PY) -m pytest -q -s -m e2e tests/e2e/test_openclaw_e2e.py $(ARGS)
