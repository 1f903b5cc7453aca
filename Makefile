# feedbench: `make run` and `make test` do all set-up on a fresh Debian machine.
# Set-up is idempotent: each step is skipped when what it installs is already there.

SHELL := /bin/bash
VENV := .venv
PYTHON ?= python3
TORCH_VERSION := 2.11.0
CARGO ?= cargo
# The real, partially downloaded LeRobot dataset that the tests read.
export FEEDBENCH_G1_PARTIAL ?= $(abspath ../shared/datasets/g1-partial)

APT_PACKAGES := pkg-config clang libclang-dev ffmpeg \
	libavcodec-dev libavformat-dev libavutil-dev libswscale-dev libswresample-dev libavfilter-dev \
	patchelf xz-utils
# Slurm and munge for the Slurm test's one-node cluster (tests/slurm/run.sh), installed without
# their recommended packages (some 20 -dev packages it does not need).
SLURM_PACKAGES := slurmctld slurmd slurm-client munge
# Debian's Chromium, in which the tests open the report's page (tests/page.rs); `make test` only.
BROWSER_PACKAGES := chromium
# Debian's nginx, the web server the tests of http:// roots read from (tests/remote.rs); and the
# S3-compatible server they read s3:// roots from, s3s-fs, built from crates.io into .tools/.
SERVER_PACKAGES := nginx iproute2
S3_SERVER := .tools/s3s-fs/bin/s3s-fs
S3_SERVER_VERSION := 0.14.1
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all setup system-packages browser servers test-build test-environments torch lerobot lerobot-main oldest-torch build run test typecheck dist dist-check wheel wheel-check gpu-kit fmt clippy clean

all: build

setup: system-packages torch

system-packages:
	@missing() { for p in "$$@"; do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done; }; \
	base=$$(missing $(APT_PACKAGES)); slurm=$$(missing $(SLURM_PACKAGES)); \
	if [ -n "$$base$$slurm" ]; then \
		echo "installing system packages:" $$base $$slurm; \
		$(SUDO) apt-get update -qq || exit 1; \
		[ -z "$$base" ] || DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$base || exit 1; \
		[ -z "$$slurm" ] || DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$slurm || exit 1; \
	fi

# libtorch from the PyPI torch wheel, in a project-local venv; `.venv/libtorch` points at it
# so that `.cargo/config.toml` does not depend on the Python version.
torch: $(VENV)/libtorch

$(VENV)/libtorch:
	@[ -x $(VENV)/bin/python ] || $(PYTHON) -m venv $(VENV)
	@$(VENV)/bin/python -c 'import importlib.metadata as m; assert m.version("torch") == "$(TORCH_VERSION)"' 2>/dev/null \
		|| $(VENV)/bin/pip install -q --disable-pip-version-check torch==$(TORCH_VERSION)
	@ln -sfn "$$($(VENV)/bin/python -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null)" $@
	@test -f $@/lib/libtorch_cpu.so || { echo "libtorch not found under $@"; rm -f $@; exit 1; }

# LeRobot in a venv of its own (the newest LeRobot the machine's Python allows: 0.6 with Python
# 3.12, else 0.4.4), for `--loader lerobot` and the tests against LeRobot.
LEROBOT_VENV := .venv-lerobot
lerobot:
	@scripts/lerobot-venv.sh $(LEROBOT_VENV)

# LeRobot's main (../shared/lerobot/, the next version) beside it, for the tests that hold the
# reader to the LeRobot users will have next.
LEROBOT_MAIN_VENV := .venv-lerobot-main
lerobot-main: lerobot
	@scripts/lerobot-main-venv.sh $(LEROBOT_MAIN_VENV) $(LEROBOT_VENV)

# The oldest torch and NumPy the reader wheel declares it runs beside (2.4.1, 1.24.4), in a venv
# of their own with nothing else, for the wheel check.
OLDEST_TORCH_VENV := .venv-torch2.4
oldest-torch:
	@PYTHON=$(PYTHON) scripts/oldest-torch-venv.sh $(OLDEST_TORCH_VENV)

# The binary and the reader's Python module (python/native) in one build, so that the
# dependencies they share are compiled once, with one set of features.
build: setup
	$(CARGO) build --release --workspace

# The main job: sweep the loader's knobs feeding the diffusion policy on a generated
# PushT-shaped dataset (configs/default.toml) and print the report; each run gets its own
# results directory.
RUN_OUT ?= results/default-$(shell date +%Y%m%d-%H%M%S)
run: build
	./target/release/feedbench sweep --config configs/default.toml --out $(RUN_OUT)

browser:
	@dpkg-query -W -f='$${Status}\n' $(BROWSER_PACKAGES) 2>/dev/null | grep -q 'install ok installed' || { \
		echo "installing $(BROWSER_PACKAGES)"; $(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(BROWSER_PACKAGES); }

# The servers the tests of URL roots read from, on loopback (docs/remote.md).
servers: $(S3_SERVER)
	@missing=$$(for p in $(SERVER_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null \
		| grep -q 'install ok installed' || echo $$p; done); \
	[ -z "$$missing" ] || { echo "installing $$missing"; $(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; }

$(S3_SERVER):
	$(CARGO) install --quiet --locked --debug s3s-fs@$(S3_SERVER_VERSION) --features binary --root .tools/s3s-fs

# The test build (CPU) and the environments the tests run in (mostly downloads: Chromium, nginx,
# the LeRobot venvs, the oldest torch for the wheel check) at once, two jobs; the environments
# one after another among themselves (apt takes one at a time).
test: setup
	$(MAKE) --no-print-directory -j2 test-build test-environments
	$(CARGO) test --lib --bins --tests -- --skip quiet::
	$(CARGO) test --benches
	$(CARGO) test --test tests quiet:: -- --test-threads=1
	tests/slurm/run.sh target/debug/feedbench
	$(CARGO) fmt --all --check
	$(MAKE) --no-print-directory typecheck
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS='-D warnings' $(CARGO) doc --no-deps --workspace --quiet
	$(MAKE) dist-check wheel-check

test-build:
	$(CARGO) build --workspace --all-targets

# The type checker over the wheel's Python (python/feedbench) and LeRobot's driver
# (src/loader/lerobot/feedbench_driver), as mypy.ini sets it: mypy, pinned, in a venv of its own
# under .tools/ (installed where it is missing or another version).
MYPY_VERSION := 2.4.1
MYPY_VENV := .tools/mypy
typecheck:
	@$(MYPY_VENV)/bin/mypy --version 2>/dev/null | grep -q '^mypy $(MYPY_VERSION) ' || { \
		echo "installing mypy $(MYPY_VERSION) into $(MYPY_VENV)"; \
		{ [ -x $(MYPY_VENV)/bin/python ] || $(PYTHON) -m venv $(MYPY_VENV); } && \
		$(MYPY_VENV)/bin/pip install -q --disable-pip-version-check mypy==$(MYPY_VERSION); }
	$(MYPY_VENV)/bin/mypy -p feedbench -p feedbench_driver

test-environments:
	@for environment in browser servers lerobot lerobot-main oldest-torch; do \
		$(MAKE) --no-print-directory $$environment || exit 1; done

# A relocatable bundle for a machine with PyTorch 2.11 and nothing else of ours:
# dist/feedbench-<version>-x86_64-linux.tar.xz (scripts/dist.sh says what is in it).
VERSION = $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
DIST_BUNDLE = dist/feedbench-$(VERSION)-x86_64-linux
DIST_TARBALL = $(DIST_BUNDLE).tar.xz
dist: build
	scripts/dist.sh target/release/feedbench

# The bundle run as a user would run it: unpacked, under env -i, with only PATH and libtorch
# (scripts/dist-check.sh), including its GPU check (CPU parts only where there is no GPU).
dist-check: dist
	scripts/dist-check.sh $(DIST_TARBALL) $(VENV)/libtorch

# The same bundle as a wheel for `pip install` into an environment with torch 2.11:
# dist/feedbench-<version>-cp39-abi3-manylinux_<glibc>_x86_64.whl, with the reader's Python module
# (scripts/wheel.py says what is in it); and the reader alone, for any torch ≥ 2.4 (NumPy ≥ 1.24):
# dist/feedbench_reader-<version>-….whl.
wheel: dist
	$(PYTHON) scripts/wheel.py $(DIST_BUNDLE) target/release/lib_native.so $(VENV)/libtorch dist
	$(PYTHON) scripts/wheel.py --reader $(DIST_BUNDLE) target/release/lib_native.so $(VENV)/libtorch dist

# The wheel installed as a user would install it, beside LeRobot, and run from a shell that knows
# neither this repository nor .venv (tests/wheel/run.sh).
wheel-check: wheel lerobot oldest-torch
	tests/wheel/run.sh "$$(ls dist/feedbench-$(VERSION)-cp39-abi3-manylinux_*_x86_64.whl)" \
		$(TORCH_VERSION) $(LEROBOT_VENV)/bin/python $(VENV)/bin/python
	tests/wheel/reader.sh "$$(ls dist/feedbench_reader-$(VERSION)-cp39-abi3-manylinux_*_x86_64.whl)" \
		$(LEROBOT_VENV)/bin/python $(OLDEST_TORCH_VENV)/bin/python

# What the GPU check needs on a machine with a GPU and PyTorch but no network: .gpu-kit/ (the wheel,
# LeRobot's and its requirements', packed to travel; `bash .gpu-kit/run.sh OUT` there runs it).
gpu-kit: wheel lerobot
	scripts/gpu-kit.sh .gpu-kit

# Build outputs (target/, dist/); the venvs stay, as set-up is the slow part (remove .venv* to
# redo it).
clean:
	$(CARGO) clean
	rm -rf dist
