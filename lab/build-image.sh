#!/usr/bin/env bash
# Build the lab's node image (Debian 12, systemd as PID 1, sshd, python3) with mmdebstrap and
# import it into podman. Cached: the image tag carries a hash of this script, so an unchanged
# script never rebuilds, and a changed one builds a new tag.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
suite=${LAB_SUITE:-bookworm}
packages=systemd,systemd-sysv,dbus,openssh-server,python3,python3-apt,sudo,iproute2,procps,kmod,ca-certificates,gnupg,apt-transport-https,curl,less
tag=$( (cat "$0"; echo "$suite") | sha256sum | cut -c1-12)
image="localhost/rackforge-lab:${suite}-${tag}"
if podman image exists "$image"; then
  echo "$image"
  exit 0
fi
work=$(mktemp -d /var/tmp/rackforge-image.XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "building $image with mmdebstrap (about a minute) ..." >&2
mmdebstrap --quiet --variant=minbase --include="$packages" \
  --customize-hook='rm -f "$1"/etc/machine-id "$1"/var/lib/dbus/machine-id; touch "$1"/etc/machine-id' \
  --customize-hook='rm -f "$1"/etc/ssh/ssh_host_*' \
  --customize-hook='chroot "$1" systemctl enable ssh.service' \
  --customize-hook='chroot "$1" systemctl mask systemd-logind.service getty.target console-getty.service systemd-udevd.service systemd-udev-trigger.service apt-daily.timer apt-daily-upgrade.timer e2scrub_reap.service' \
  --customize-hook='mkdir -p "$1"/root/.ssh && chmod 0700 "$1"/root/.ssh' \
  --customize-hook='mkdir -p "$1"/etc/systemd/system/ssh.service.d && printf "[Service]\nExecStartPre=\nExecStartPre=/usr/bin/ssh-keygen -A\nExecStartPre=/usr/sbin/sshd -t\n" > "$1"/etc/systemd/system/ssh.service.d/rackforge-lab-keygen.conf' \
  "$suite" "$work/rootfs.tar" >&2
podman import --change 'CMD ["/sbin/init"]' --change 'ENV container=podman' "$work/rootfs.tar" "$image" >/dev/null
# older tags of the lab image are no longer used
podman images --format '{{.Repository}}:{{.Tag}}' | grep '^localhost/rackforge-lab:' | grep -v "^$image\$" | xargs -r podman rmi >/dev/null 2>&1 || true
echo "$image"
