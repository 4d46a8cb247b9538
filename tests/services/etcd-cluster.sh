#!/usr/bin/env bash
# A 3-member etcd cluster on 127.0.0.1 for the conformance and bench runs
# of shared mode (the Rust tests start their own, tests/etcd.rs).
#   etcd-cluster.sh start DIR   starts it with its data and logs in DIR, waits
#                               until it takes a write, and prints the
#                               endpoints (host:port,host:port,host:port)
#   etcd-cluster.sh stop DIR    stops the members it started, by the PIDs in
#                               DIR/pids (SIGTERM, then SIGKILL after 5 s)
# Client ports BASE, BASE+2, BASE+4 and peer ports one above each; BASE is
# $ETCD_BASE_PORT or 24790.
set -euo pipefail
cmd=${1:?usage: etcd-cluster.sh start|stop DIR}
dir=${2:?usage: etcd-cluster.sh start|stop DIR}
base=${ETCD_BASE_PORT:-24790}

case "$cmd" in
start)
  mkdir -p "$dir"
  : > "$dir/pids"
  cluster=""
  for i in 0 1 2; do
    cluster+="${cluster:+,}m$i=http://127.0.0.1:$((base + 2 * i + 1))"
  done
  for i in 0 1 2; do
    c=$((base + 2 * i)); p=$((base + 2 * i + 1))
    etcd --name "m$i" --data-dir "$dir/m$i" \
      --listen-client-urls "http://127.0.0.1:$c" --advertise-client-urls "http://127.0.0.1:$c" \
      --listen-peer-urls "http://127.0.0.1:$p" --initial-advertise-peer-urls "http://127.0.0.1:$p" \
      --initial-cluster "$cluster" --initial-cluster-state new \
      --initial-cluster-token "churnfs-$$" > "$dir/m$i.log" 2>&1 &
    echo $! >> "$dir/pids"
  done
  eps="127.0.0.1:$base,127.0.0.1:$((base + 2)),127.0.0.1:$((base + 4))"
  for _ in $(seq 300); do
    if ETCDCTL_API=3 etcdctl --endpoints="$eps" --dial-timeout=1s put churnfs-ready 1 >/dev/null 2>&1; then
      echo "$eps"
      exit 0
    fi
    sleep 0.1
  done
  echo "etcd-cluster: not ready after 30 s (logs in $dir)" >&2
  exit 1
  ;;
stop)
  [ -f "$dir/pids" ] || exit 0
  pids=$(cat "$dir/pids")
  for p in $pids; do kill "$p" 2>/dev/null || true; done
  for _ in $(seq 50); do
    alive=""
    for p in $pids; do kill -0 "$p" 2>/dev/null && alive+=" $p"; done
    [ -z "$alive" ] && break
    sleep 0.1
  done
  for p in $pids; do kill -9 "$p" 2>/dev/null || true; done
  rm -f "$dir/pids"
  ;;
*)
  echo "usage: etcd-cluster.sh start|stop DIR" >&2
  exit 2
  ;;
esac
