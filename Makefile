# One entry point for people and CI. `make mount` installs what is missing and
# mounts a churnfs filesystem; `make test` runs every check CI runs.

export CARGO_TARGET_DIR ?= $(HOME)/.cache/churnfs-target
STORE ?= $(HOME)/.local/share/churnfs/default
MNT ?= /tmp/churnfs
BIN := $(CARGO_TARGET_DIR)/release/churnfs

.PHONY: deps build mount unmount test lint unit conformance crash-long fmt

deps:
	@scripts/install-deps.sh

build: deps
	cargo build --release -p churnfs

# Create the default store on first use, then mount it in the background.
mount: build
	@mkdir -p "$(MNT)"
	@test -d "$(STORE)/db" || $(BIN) mkfs "$(STORE)"
	$(BIN) mount "$(STORE)" "$(MNT)" --background

unmount:
	fusermount3 -u "$(MNT)"

fmt:
	cargo fmt --all

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings

unit:
	cargo build -p churnfs
	cargo test --workspace

# pjdfstest, fsx and stress-ng on fresh mounts of the release binary.
conformance: build
	tests/conformance/run.sh

test: deps lint unit conformance

# The seeded crash simulation at length (not part of `make test`).
CRASH_SEEDS ?= 10000
crash-long:
	CHURNFS_CRASH_SEEDS=$(CRASH_SEEDS) cargo test --release -p churnfs-tests --test scenarios crash -- --nocapture

# The shared-mode simulation at length (not part of `make test`).
SHARED_SEEDS ?= 5000
.PHONY: shared-long
shared-long:
	CHURNFS_SHARED_SEEDS=$(SHARED_SEEDS) cargo test --release -p churnfs-tests --test scenarios shared_sim -- --nocapture

# Benchmarks (never part of `make test`): workloads × targets, report and plots
# in bench/results/<date>-<size>.md. SIZE=tiny|quick|reference|long;
# TARGETS and WORKLOADS are comma-separated lists or "all"; RUNS overrides the
# number of runs. Needs root (tmpfs, loop devices, mounts under /tmp).
SIZE ?= quick
TARGETS ?= all
WORKLOADS ?= all
RUNS ?=
BENCH := $(CARGO_TARGET_DIR)/release/churnfs-bench

.PHONY: bench
bench: deps
	@bench/install.sh
	cargo build --release -p churnfs -p churnfs-bench
	$(BENCH) suite --size $(SIZE) --targets $(TARGETS) --workloads $(WORKLOADS) $(if $(RUNS),--runs $(RUNS))
