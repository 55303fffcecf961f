#!/usr/bin/env bash
# Fetches the REAL nvidia-smi binary (Debian 12 non-free, package nvidia-smi) into
# .cache/realtools/ for the lab packages and the unit tests. apt checks Debian's signatures with
# the host's keyring; the .deb's sha256 is pinned here as well. The host's apt sources are not
# touched: a private sources.list, lists and cache in a temporary directory.
#
# Only the nvidia-smi binary is taken. Debian's libnvidia-ml1 (the real NVML) is never fetched
# or installed: the lab runs the binary over its own NVML (lab/nvml), and the real one, loaded
# as root, creates /dev/nvidiactl.
#
# Idempotent and quiet when the binary is cached. Prints the binary's path on stdout with --print.
set -euo pipefail
cd "$(dirname "$0")/../.."
version=535.261.03
deb_version=$version-1
sha256=9b4392fa97957603d96f3cf1141fe78d871f5bcdd2e6bf810bce278cc14cb6d4
dest=.cache/realtools/nvidia-smi-$version
if [ -x "$dest/nvidia-smi" ] && [ "$(cat "$dest/deb.sha256" 2>/dev/null)" = "$sha256" ]; then
  [ "${1:-}" = "--print" ] && echo "$PWD/$dest/nvidia-smi"
  exit 0
fi
for tool in apt-get dpkg-deb sha256sum; do
  command -v "$tool" >/dev/null || { echo "fetch-nvidia-smi: $tool not found (a Debian host is needed)" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial"
echo "deb http://deb.debian.org/debian bookworm non-free" > "$work/sources.list"
apt=(apt-get -q -o "Dir::Etc::sourcelist=$work/sources.list" -o Dir::Etc::sourceparts=- -o "Dir::State::Lists=$work/lists"
  -o "Dir::Cache=$work/cache" -o APT::Sandbox::User=root)
echo "fetch-nvidia-smi: downloading nvidia-smi $deb_version (Debian 12 non-free)" >&2
"${apt[@]}" update >"$work/update.log" 2>&1 || { cat "$work/update.log" >&2; echo "fetch-nvidia-smi: apt-get update failed" >&2; exit 1; }
if ! (cd "$work" && "${apt[@]}" download "nvidia-smi=$deb_version") >"$work/download.log" 2>&1; then
  cat "$work/download.log" >&2
  echo "fetch-nvidia-smi: nvidia-smi $deb_version is not in bookworm non-free any more; update version and sha256 in $0" >&2
  exit 1
fi
deb=$work/nvidia-smi_${deb_version}_amd64.deb
got=$(sha256sum "$deb" | cut -d' ' -f1)
if [ "$got" != "$sha256" ]; then
  echo "fetch-nvidia-smi: $deb has sha256 $got, expected $sha256" >&2
  exit 1
fi
dpkg-deb -x "$deb" "$work/x"
mkdir -p "$dest"
install -m 0755 "$work/x/usr/lib/nvidia/current/nvidia-smi" "$dest/nvidia-smi.tmp"
mv "$dest/nvidia-smi.tmp" "$dest/nvidia-smi"
echo "$sha256" > "$dest/deb.sha256"
[ "${1:-}" = "--print" ] && echo "$PWD/$dest/nvidia-smi"
exit 0
