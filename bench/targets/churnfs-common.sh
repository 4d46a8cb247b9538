# churnfs with its store on a tmpfs (STORE_ON=tmpfs) or on the machine's disk
# (STORE_ON=disk, under $BENCH_DISK_DIR, default /var/tmp). Sourced by
# churnfs-tmpfs.sh and churnfs-disk.sh after lib.sh.
BIN=${CHURNFS_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/churnfs-target}/release/churnfs}
DISK_DIR=${BENCH_DISK_DIR:-/var/tmp}

store() {
  if [ "$STORE_ON" = tmpfs ]; then
    echo "$RAM/store"
  else
    echo "$(cat "$STATE/diskdir")/store"
  fi
}

start() {
  # shellcheck disable=SC2086
  churnfs_background "$STATE/pid" "$(store)" "$MNT" ${CHURNFS_MOUNT_OPTS:-}
}

case "$ACTION" in
  check)
    [ -x "$BIN" ] || die "$BIN missing (cargo build --release -p churnfs)"
    # The default (uring=auto) serves over io_uring only where the fuse
    # module's enable_uring is on; say which the run gets.
    case "${CHURNFS_MOUNT_OPTS:-}" in
      *uring=*) via="" ;;
      *) [ "$(cat /sys/module/fuse/parameters/enable_uring 2>/dev/null)" = Y ] &&
        via=", over io_uring (enable_uring Y)" || via=", over /dev/fuse (enable_uring not on)" ;;
    esac
    if [ "$STORE_ON" = tmpfs ]; then
      echo "desc=churnfs, store on tmpfs${CHURNFS_MOUNT_OPTS:+, $CHURNFS_MOUNT_OPTS}$via"
    else
      echo "desc=churnfs, store on disk ($(df --output=source "$DISK_DIR" | tail -n 1) at $DISK_DIR)${CHURNFS_MOUNT_OPTS:+, $CHURNFS_MOUNT_OPTS}$via"
    fi
    echo "version=$("$BIN" --version 2>/dev/null | head -n 1)"
    ;;
  up)
    mkdir -p "$MNT"
    if [ "$STORE_ON" = tmpfs ]; then
      ram_up
    else
      mktemp -d "$DISK_DIR/churnfs-bench.XXXXXX" >"$STATE/diskdir"
    fi
    "$BIN" mkfs "$(store)" >/dev/null
    start
    echo "mnt=$MNT"
    echo "pid=$(daemon_pid)"
    ;;
  umount) fuse_umount ;;
  remount)
    unmount_for_remount
    start
    echo "pid=$(daemon_pid)"
    ;;
  kill)
    pid=$(daemon_pid)
    ours "$pid" || die "no daemon of ours to kill"
    kill -KILL "$pid"
    wait_daemon_gone 30 || die "daemon $pid survived SIGKILL"
    fusermount3 -u -z "$MNT"
    ;;
  reclaimed)
    stats=$("$BIN" stats "$MNT") || exit 1
    # The mount returns before the orphans are freed: done when the
    # background reclaim has ended and no unlinked inode is held.
    running=$(echo "$stats" | awk '$1 == "recovery_running" { print $2 }')
    left=$(echo "$stats" | awk '$1 == "unlinked_inodes" { print $2 }')
    [ "${running:-1}" = 0 ] && [ "${left:-1}" = 0 ] || exit 1
    echo "$stats" | awk '$1 == "recovered_unlinked" { print "recovered_unlinked=" $2 }'
    ;;
  down)
    teardown_disk=""
    [ -s "$STATE/diskdir" ] && teardown_disk=$(cat "$STATE/diskdir")
    teardown
    case "$teardown_disk" in
      "$DISK_DIR"/churnfs-bench.*) rm -rf --one-file-system "$teardown_disk" ;;
    esac
    ;;
  *) unknown_action ;;
esac
