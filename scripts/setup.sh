#!/usr/bin/env bash
# Installs everything rackforge's lab and tests need on a fresh Debian 12 machine (as root):
# apt packages for the podman lab, and a virtualenv (.venv) with requirements.txt.
# Idempotent and quiet when nothing is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
apt_packages=(podman runc mmdebstrap uidmap slirp4netns fuse-overlayfs gnupg openssh-client)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing apt packages ${missing[*]}; run as root (or install them) first" >&2
    exit 1
  fi
  echo "setup: apt-get install ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
py=${PYTHON:-python3}
stamp=.venv/.requirements.sha256
want=$(sha256sum requirements.txt | cut -d' ' -f1)
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: creating .venv from requirements.txt" >&2
  "$py" -m venv .venv
  .venv/bin/pip install -q --upgrade pip >/dev/null
  .venv/bin/pip install -q -r requirements.txt
  echo "$want" > "$stamp"
fi
