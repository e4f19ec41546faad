# Thin targets over nox sessions and the project virtualenv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SOURCES := pyproject.toml CMakeLists.txt $(wildcard runtime/*) $(wildcard pynox/*.py pynox/*/*.py) $(wildcard sitehook/*)

# With pyenv, make every installed CPython visible as python3.X for the test matrix.
ifneq ($(shell command -v pyenv 2>/dev/null),)
export PYENV_VERSION := $(shell pyenv versions --bare --skip-aliases 2>/dev/null | grep -E '^3\.[0-9]+\.[0-9]+$$' | sort -t. -k2,2nr | tr '\n' ':' | sed 's/:$$//')
endif

.PHONY: setup test demo lint bench clean docs

setup: $(VENV)/.installed

# The cffi a bundle ships (dist-config/packages.toml): bundles built from .venv take the
# binding this cffi writes.
CFFI_VERSION := $(shell sed -n '/^\[cffi\]/,/^\[/s/^version = "\(.*\)"/\1/p' dist-config/packages.toml)

$(VENV)/.installed: $(SOURCES) dist-config/packages.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q nox ".[test,lint]" "cffi==$(CFFI_VERSION)"
	touch $@

test: setup
	$(BIN)/nox -s lint tests ray docs examples

lint: setup
	$(BIN)/nox -s lint

# The documentation site, built strictly into site/, and its commands run (tests/test_docs.py).
docs: setup
	$(BIN)/nox -s docs

demo: setup
	@echo "\$$ pynox examples/hello.py"
	@$(BIN)/pynox examples/hello.py
	@echo
	@echo "\$$ pynox examples/probe.py    # reads /etc/hostname, which was not granted"
	@$(BIN)/pynox examples/probe.py || echo "(exit status $$?)"
	@echo
	@echo "\$$ pynox --allow-read=/etc/hostname examples/probe.py"
	@$(BIN)/pynox --allow-read=/etc/hostname examples/probe.py

# make bench                     the full suite; writes bench/results.md
# make bench BENCH_ARGS=--quick  a smoke run that writes nothing
# The packages the heavy-import rows preload, installed once beside the virtualenv.
BENCH_PACKAGES := .bench-packages

bench: setup $(BENCH_PACKAGES)/.installed $(VENV)/.ray-installed
	$(BIN)/python bench/suite.py --packages $(BENCH_PACKAGES) $(BENCH_ARGS)

# The Ray row runs RayPool (pynox[ray]), whose actors import Ray from the environment.
$(VENV)/.ray-installed: $(VENV)/.installed
	$(BIN)/python -c 'import ray' 2>/dev/null || $(BIN)/python -m pip install -q ".[ray]"
	touch $@

$(BENCH_PACKAGES)/.installed: requirements/agent-tasks.txt
	$(BIN)/python -m pip install -q --target $(BENCH_PACKAGES) -r requirements/agent-tasks.txt
	touch $@

clean:
	rm -rf $(VENV) .nox build dist $(BENCH_PACKAGES)

# --- Distribution (bundler/, dist-config/, install/) ---------------------------------
# make bundle                      this machine's target, the venv's CPython minor
# make bundle TARGET=aarch64-linux-musl PYTHON=3.12
# make bundle PYNOX_RUNTIME=cpython.tar.gz   a local runtime (its minor is the default)
# make bundle SIGN_KEY=release-key  also ARCHIVE.sig (ssh-keygen -Y sign -n pynox-bundle)
# make wheel                       the host wheel for the venv's CPython, repaired by auditwheel
# make wheel PYTHON=3.12           the host wheel for CPython 3.12 (which must be installed)
# make wheel WHEEL_ARGS=--check-reproducible   built twice, the same bytes required
# make wheels                      one wheel per installed CPython 3.10-3.14 (nox -s wheels)
# make bundle WHEELHOUSE=wheels    a build host without PyPI: every wheel, the tools' and the
#                                  bundle's, from that folder (pip --no-index --find-links)
.PHONY: bundle wheel wheels cross refresh-pins refresh-wheel-pins
# Given on make's command line, these reach the bundler too (only when set).
BUNDLE_ENV := PYNOX_RUNTIME PYNOX_RUNTIME_SHA256 PYNOX_PBS_MIRROR SOURCE_DATE_EPOCH
$(foreach v,$(BUNDLE_ENV),$(if $($(v)),$(eval export $(v))))
# PYTHON=3.X names a bundle's CPython; the venv is still made by python3.
SETUP_PYTHON := $(if $(filter 3.%,$(PYTHON)),python3,$(PYTHON))
BUNDLE_MINOR := $(filter 3.%,$(PYTHON))
# WHEELHOUSE reaches nox's sessions as PYNOX_WHEELHOUSE (noxfile.py), and `make setup`, which
# runs first, as pip's own settings. A folder that is not there stops the target at once.
ifneq ($(WHEELHOUSE),)
bundle wheel wheels: export PYNOX_WHEELHOUSE := $(abspath $(WHEELHOUSE))
endif
# make splits a path at its spaces, and so does pip's PIP_FIND_LINKS: such a folder is refused.
OFFLINE_SETUP := $(if $(word 2,$(WHEELHOUSE)),{ echo "make: WHEELHOUSE=$(WHEELHOUSE) holds a space: make and pip would read it as several folders; put the wheels in a folder whose path has none" >&2; exit 1; };)$(if $(WHEELHOUSE),[ -d "$(WHEELHOUSE)" ] || { echo "make: WHEELHOUSE=$(WHEELHOUSE) is not a folder; give the folder of wheels" >&2; exit 1; }; PIP_NO_INDEX=1 PIP_FIND_LINKS="$(abspath $(WHEELHOUSE))")

bundle:
	@$(OFFLINE_SETUP) $(MAKE) --no-print-directory setup PYTHON=$(SETUP_PYTHON)
	@target="$(TARGET)"; [ -n "$$target" ] || target=$$($(BIN)/python -m bundler host-target) || exit 1; \
	minor="$(BUNDLE_MINOR)"; [ -n "$$minor" ] || minor=$$($(BIN)/python -m bundler default-python) || exit 1; \
	$(BIN)/python -m bundler targets --has "$$target" "$$minor" || exit 1; \
	$(BIN)/nox -s "bundle(target='$$target', cpython='$$minor')" $(if $(SIGN_KEY),-- --sign-key "$(SIGN_KEY)")

wheel:
	@$(OFFLINE_SETUP) $(MAKE) --no-print-directory setup PYTHON=$(SETUP_PYTHON)
	@minor="$(BUNDLE_MINOR)"; [ -n "$$minor" ] || minor=$$($(BIN)/python -c 'import sys; print("%d.%d" % sys.version_info[:2])'); \
	$(BIN)/nox --error-on-missing-interpreters -s "wheels-$$minor" -- $(WHEEL_ARGS)

wheels:
	@$(OFFLINE_SETUP) $(MAKE) --no-print-directory setup PYTHON=$(SETUP_PYTHON)
	$(BIN)/nox -s wheels -- $(WHEEL_ARGS)

cross:
	@$(MAKE) --no-print-directory setup PYTHON=$(SETUP_PYTHON)
	$(BIN)/nox -s $(if $(TARGET),"cross(target='$(TARGET)')",cross)

# make refresh-pins PINS_ARGS="--tag 20260814 --table dist-config/pbs-checksums/pbs-20260814.tsv"
refresh-pins:
	@$(MAKE) --no-print-directory setup PYTHON=$(SETUP_PYTHON)
	$(BIN)/nox -s refresh_pins $(if $(PINS_ARGS),-- $(PINS_ARGS))

# make refresh-wheel-pins          after a version changes in dist-config/packages.toml
refresh-wheel-pins:
	@$(MAKE) --no-print-directory setup PYTHON=$(SETUP_PYTHON)
	$(BIN)/nox -s refresh_wheel_pins

# --- Conformance (bundler/conformance, tests/conformance) ----------------------------
# make conformance-deps          installs what the cells need, with apt (asks for nothing else)
# make conformance               this machine's cell (x86_64-linux-gnu), in a container
# make conformance CELL=aarch64-linux-gnu                the arm64 kernel, under QEMU
# make conformance CELL="x86_64-linux-gnu aarch64-linux-gnu-kernel-6.1"   several cells
# make conformance CELL=all      every cell of dist-config/conformance.toml
# make conformance-prepare CELL=...   only makes what those cells cache (roots, disk and
#                                boot images, the arm64 bundle), to run beside other work
# `make conformance` installs nothing on the machine: it says what is missing. Every run
# prints the table of every cell and writes it to dist/conformance.md.
.PHONY: conformance conformance-deps conformance-prepare
CELL ?= x86_64-linux-gnu
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
# QEMU for both CPUs, qemu-user and binfmt for packing the arm64 runtime, debootstrap and
# bubblewrap for the roots, e2fsprogs for the VM's disks. The VM's kernels and busybox come
# from `apt-get download PACKAGE:ARCH` (busybox-static:arm64 cannot be installed beside
# the amd64 one), which needs the arm64 architecture known to dpkg. strace: a test of the
# launcher's scratch helper watches which process makes the run's directory. btrfs-progs:
# the escape suite's btrfs probes make and mount a file system of their own.
CONFORMANCE_DEBS := bubblewrap debootstrap qemu-system-arm qemu-system-x86 qemu-user-static \
	e2fsprogs xz-utils openssl strace btrfs-progs
conformance-deps:
	$(SUDO) dpkg --add-architecture arm64
	$(SUDO) apt-get update -qq
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		$(CONFORMANCE_DEBS)
	apt-get download --print-uris busybox-static:arm64 >/dev/null

conformance: setup
	$(BIN)/nox -s conformance $(if $(filter all,$(CELL)),,-- $(CELL))

conformance-prepare: setup
	$(BIN)/nox -s conformance -- --prepare $(if $(filter all,$(CELL)),,$(CELL))
