# One entry point for people and CI. `make mount` installs what is missing and
# mounts a churnfs filesystem; `make test` runs every check CI runs.

export CARGO_TARGET_DIR ?= $(HOME)/.cache/churnfs-target
STORE ?= $(HOME)/.local/share/churnfs/default
MNT ?= /tmp/churnfs
BIN := $(CARGO_TARGET_DIR)/release/churnfs

PREFIX ?= /usr/local
SBIN ?= /sbin
INSTALLED := $(DESTDIR)$(PREFIX)/bin/churnfs
# The systemd unit template (dist/churnfs@.service), where systemd looks for
# units under the prefix.
UNIT := $(DESTDIR)$(PREFIX)/lib/systemd/system/churnfs@.service
# Installing writes system directories: through sudo unless root.
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

.PHONY: deps build install uninstall mount unmount test lint unit conformance crash-long fmt

deps:
	@scripts/install-deps.sh

build: deps
	cargo build --release -p churnfs

# churnfs on the PATH, the mount(8) helper (`mount -t fuse.churnfs`, fstab
# lines of type fuse.churnfs), the manual pages and the systemd unit.
install: build
	$(SUDO) install -D -m 0755 $(BIN) $(INSTALLED)
	$(SUDO) install -d $(DESTDIR)$(SBIN)
	$(SUDO) ln -sf $(PREFIX)/bin/churnfs $(DESTDIR)$(SBIN)/mount.fuse.churnfs
	$(SUDO) ln -sf $(PREFIX)/bin/churnfs $(DESTDIR)$(SBIN)/mount.churnfs
	$(SUDO) $(BIN) man $(DESTDIR)$(PREFIX)/share/man/man8
	sed 's|@BINDIR@|$(PREFIX)/bin|' dist/churnfs@.service > $(CARGO_TARGET_DIR)/churnfs@.service
	$(SUDO) install -D -m 0644 $(CARGO_TARGET_DIR)/churnfs@.service $(UNIT)

uninstall:
	$(SUDO) rm -f $(INSTALLED) $(DESTDIR)$(SBIN)/mount.fuse.churnfs $(DESTDIR)$(SBIN)/mount.churnfs
	$(SUDO) rm -f $(DESTDIR)$(PREFIX)/share/man/man8/churnfs*.8 $(DESTDIR)$(PREFIX)/share/man/man8/mount.*churnfs.8
	$(SUDO) rm -f $(UNIT)

# Install, create the default store on first use, then mount it in the
# background with the installed binary.
mount: install
	@mkdir -p "$(MNT)"
	@test -d "$(STORE)/db" || $(INSTALLED) mkfs "$(STORE)"
	$(INSTALLED) mount "$(STORE)" "$(MNT)" --background

unmount:
	umount "$(MNT)" 2>/dev/null || fusermount3 -u "$(MNT)"

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
