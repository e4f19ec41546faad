# Thin targets over nox sessions and the project virtualenv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SOURCES := pyproject.toml CMakeLists.txt $(wildcard runtime/*) $(wildcard pynox/*.py)

# With pyenv, make every installed CPython visible as python3.X for the test matrix.
ifneq ($(shell command -v pyenv 2>/dev/null),)
export PYENV_VERSION := $(shell pyenv versions --bare --skip-aliases 2>/dev/null | grep -E '^3\.[0-9]+\.[0-9]+$$' | sort -t. -k2,2nr | tr '\n' ':' | sed 's/:$$//')
endif

.PHONY: setup test demo lint bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: $(SOURCES)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q nox ".[test,lint]"
	touch $@

test: setup
	$(BIN)/nox -s lint tests

lint: setup
	$(BIN)/nox -s lint

demo: setup
	@echo "\$$ pynox examples/hello.py"
	@$(BIN)/pynox examples/hello.py
	@echo
	@echo "\$$ pynox examples/probe.py    # reads /etc/hostname, which was not granted"
	@$(BIN)/pynox examples/probe.py || echo "(exit status $$?)"
	@echo
	@echo "\$$ pynox --allow-read=/etc/hostname examples/probe.py"
	@$(BIN)/pynox --allow-read=/etc/hostname examples/probe.py

bench: setup
	$(BIN)/python bench/startup.py

clean:
	rm -rf $(VENV) .nox build dist
