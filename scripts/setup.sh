#!/usr/bin/env bash
# Installs everything rackforge's lab and tests need on a fresh Debian 12 machine (as root):
# apt packages for the podman lab and the monitoring tests (prometheus, promtool), and a
# virtualenv (.venv) with requirements.txt.
# Idempotent and quiet when nothing is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
apt_packages=(podman runc mmdebstrap uidmap slirp4netns fuse-overlayfs gnupg openssh-client prometheus prometheus-alertmanager nftables)
# the REAL ibstat/ibstatus that the unit tests run over the simulated sysfs tree, and the compiler
# for the lab's sysfs redirect library (lab/sysfs_redirect; the lab nodes have no compiler)
apt_packages+=(infiniband-diags pciutils gcc libc6-dev)
# the headless browser that checks the fleet report (tests/unit/test_fleet_browser.py)
apt_packages+=(chromium)
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
  # installing must not start services on this machine (the prometheus package would start a
  # server): a policy-rc.d that denies every start, only for the length of the install
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod 0755 /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
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
lab/nvml/fetch-nvidia-smi.sh  # the REAL nvidia-smi (Debian non-free) that the lab and the unit tests run
