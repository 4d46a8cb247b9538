#!/usr/bin/env bash
# libfuse's passthrough_ll example over a tmpfs directory: the cost of FUSE
# itself. Built from the C source that the Debian package libfuse3-dev ships
# in its examples folder, into $BENCH_TOOLS.
. "$(dirname "$0")/lib.sh"
EXAMPLES=/usr/share/doc/libfuse3-dev/examples
TOOLS=${BENCH_TOOLS:-${CARGO_TARGET_DIR:-$HOME/.cache/churnfs-target}/bench-tools}
BIN=$TOOLS/passthrough_ll

build() {
  [ -x "$BIN" ] && [ "$BIN" -nt "$EXAMPLES/passthrough_ll.c" ] && return 0
  [ -r "$EXAMPLES/passthrough_ll.c" ] || die "$EXAMPLES/passthrough_ll.c missing (package libfuse3-dev; bench/install.sh)"
  command -v cc >/dev/null || die "no C compiler (cc)"
  pkg-config --exists fuse3 || die "pkg-config cannot find fuse3 (packages pkg-config, libfuse3-dev)"
  mkdir -p "$TOOLS"
  # The example's source expects HAVE_* from libfuse's own build: on Linux
  # with glibc fallocate and copy_file_range both exist.
  # shellcheck disable=SC2046
  cc -O2 -Wall -Wno-cpp -DHAVE_FALLOCATE -DHAVE_COPY_FILE_RANGE -I"$EXAMPLES" \
    $(pkg-config fuse3 --cflags) "$EXAMPLES/passthrough_ll.c" -o "$BIN.tmp$$" \
    $(pkg-config fuse3 --libs) 2>"$TOOLS/build.log" ||
    die "passthrough_ll does not build: $(tail -n 1 "$TOOLS/build.log")"
  mv "$BIN.tmp$$" "$BIN"
}

# passthrough_ll-xattr.sh sets PASSTHROUGH_OPTS=",xattr".
start() { start_daemon "$BIN" -f -o "source=$RAM${PASSTHROUGH_OPTS:-}" "$MNT"; }

case "$ACTION" in
  check)
    build
    echo "desc=${PASSTHROUGH_DESC:-libfuse passthrough_ll (libfuse3-dev example, default options) over tmpfs}"
    echo "version=libfuse $(pkg-config --modversion fuse3)"
    ;;
  up)
    build
    mkdir -p "$MNT"
    ram_up
    start
    wait_mounted
    echo "mnt=$MNT"
    echo "pid=$(daemon_pid)"
    ;;
  umount) fuse_umount ;;
  remount)
    unmount_for_remount
    start
    wait_mounted
    echo "pid=$(daemon_pid)"
    ;;
  down) teardown ;;
  *) unknown_action ;;
esac
