"""A REAL package from Debian 13 (trixie) for the lab mirror's /containerd repository: containerd
1.7.24, the first Debian containerd with CDI (CRI CDIDevices from 1.7.2; Debian 12 has 1.6.20).

Its Depends (runc >= 0.1.0~, libc6 >= 2.34) are met by Debian 12, so it installs on the bookworm
lab nodes from a repository of its own, as an operator installs Docker's containerd.io 1.7 from
download.docker.com or an internal mirror's copy of this package. The trust chain is Debian's:
trixie's InRelease is checked with gpgv against the host's debian-archive-keyring, the
Packages.xz it lists by sha256, and the .deb by the sha256 that index gives it. Nothing is taken
on our word. Part of lab/mirror/build.py."""

from __future__ import annotations

import hashlib
import lzma
import os
import subprocess
import tempfile
import urllib.request

DEBIAN = "http://deb.debian.org/debian"
SUITE = "trixie"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
INDEX = "main/binary-amd64/Packages.xz"
# (package, exact Debian version): a point release may replace it; the build then fails naming it
CONTAINERD = ("containerd", "1.7.24~ds1-6+deb13u1")


class TrustError(RuntimeError):
    pass


def _get(url):
    # deb.debian.org only (the URLs are built from DEBIAN above)
    with urllib.request.urlopen(url, timeout=120) as resp:
        return resp.read()


def verified_release(fetch=_get, keyring=KEYRING):
    """trixie's InRelease text, after gpgv accepts its signature by a key of the keyring."""
    data = fetch("%s/dists/%s/InRelease" % (DEBIAN, SUITE))
    with tempfile.NamedTemporaryFile(suffix=".InRelease") as fh:
        fh.write(data)
        fh.flush()
        res = subprocess.run(["gpgv", "--keyring", keyring, fh.name], check=False, capture_output=True, text=True)
    if res.returncode != 0:
        raise TrustError("gpgv refused %s's InRelease (rc %d): %s" % (SUITE, res.returncode, res.stderr.strip()))
    return data.decode()


def release_sha256(release, name):
    """The sha256 the Release text gives the index file `name`."""
    section = False
    for line in release.splitlines():
        if not line.startswith(" "):
            section = line.strip() == "SHA256:"
            continue
        if section:
            parts = line.split()
            if len(parts) == 3 and parts[2] == name:
                return parts[0]
    raise TrustError("%s's Release lists no SHA256 for %s" % (SUITE, name))


def stanza(packages_text, package, version):
    """The Packages stanza of package at version, as {field: value}."""
    for block in packages_text.split("\n\n"):
        fields = {}
        for line in block.splitlines():
            if line[:1] not in (" ", "") and ":" in line:
                key, value = line.split(":", 1)
                fields[key] = value.strip()
        if fields.get("Package") == package and fields.get("Version") == version:
            return fields
    raise TrustError(
        "%s %s is not in %s main any more (a point release replaced it): update CONTAINERD in lab/mirror/mirror_trixie.py"
        % (package, version, SUITE)
    )


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def trixie_debs(pool, cache, fetch=_get):
    """Download the trixie packages into the pool (a verified copy in cache is reused); returns their paths."""
    os.makedirs(cache, exist_ok=True)
    package, version = CONTAINERD
    name = "%s_%s_amd64.deb" % (package, version)
    cached = os.path.join(cache, name)
    want = None
    if os.path.exists(cached):
        # the copy's sha256 was checked against the signed index when it was fetched; a stamp
        # beside it names that sha256, and the copy is used only while it still matches
        stamp = cached + ".sha256"
        if os.path.exists(stamp):
            want = open(stamp).read().strip()
            if sha256(open(cached, "rb").read()) != want:
                want = None
    if want is None:
        release = verified_release(fetch)
        index = fetch("%s/dists/%s/%s" % (DEBIAN, SUITE, INDEX))
        if sha256(index) != release_sha256(release, INDEX):
            raise TrustError("%s/%s does not match the sha256 its signed Release gives it" % (SUITE, INDEX))
        entry = stanza(lzma.decompress(index).decode(), package, version)
        data = fetch("%s/%s" % (DEBIAN, entry["Filename"]))
        if sha256(data) != entry["SHA256"]:
            raise TrustError("%s does not match the sha256 of %s's signed index" % (entry["Filename"], SUITE))
        with open(cached, "wb") as fh:
            fh.write(data)
        with open(cached + ".sha256", "w") as fh:
            fh.write(entry["SHA256"] + "\n")
    out = os.path.join(pool, name)
    with open(cached, "rb") as src, open(out, "wb") as dst:
        dst.write(src.read())
    return [out]
