"""A REAL package from Debian 13 (trixie) for the lab mirror's /containerd repository: containerd
1.7.24, the first Debian containerd with CDI (CRI CDIDevices from 1.7.2; Debian 12 has 1.6.20).

Its Depends (runc >= 0.1.0~, libc6 >= 2.34) are met by Debian 12, so it installs on the bookworm
lab nodes from a repository of its own, as an operator installs Docker's containerd.io 1.7 from
download.docker.com or an internal mirror's copy of this package. The trust chain is Debian's:
trixie's InRelease is checked with gpgv against the host's debian-archive-keyring, the
Packages.xz it lists by sha256, and the .deb by the sha256 that index gives it, which must also
be the one pinned here (so a cached copy is checked against the pin, never against a note beside
it). Only the text gpgv says is signed is read: anything around the armor is ignored. Part of
lab/mirror/build.py."""

from __future__ import annotations

import hashlib
import lzma
import os
import shutil
import subprocess
import tempfile
import urllib.request

from mirror_repo import digest

DEBIAN = "http://deb.debian.org/debian"
SUITE = "trixie"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
INDEX = "main/binary-amd64/Packages.xz"
# (package, exact Debian version, the .deb's sha256 as trixie's signed index gives it): a point
# release may replace it; the build then fails naming it
CONTAINERD = ("containerd", "1.7.24~ds1-6+deb13u1", "ed708deb96fe476a3bce4efa5c0538dfbcf717ab9a7c7944ba7260342c25899c")


class TrustError(RuntimeError):
    pass


def _get(url):
    # deb.debian.org only (the URLs are built from DEBIAN above)
    with urllib.request.urlopen(url, timeout=120) as resp:
        return resp.read()


def verified_release(fetch=_get, keyring=KEYRING):
    """The signed text of trixie's InRelease, as gpgv writes it out after accepting the signature by
    a key of the keyring (text before or after the armor, which gpgv does not check, is dropped)."""
    data = fetch("%s/dists/%s/InRelease" % (DEBIAN, SUITE))
    with tempfile.NamedTemporaryFile(suffix=".InRelease") as fh:
        fh.write(data)
        fh.flush()
        res = subprocess.run(["gpgv", "--keyring", keyring, "--output", "-", fh.name], check=False, capture_output=True)
    if res.returncode != 0:
        raise TrustError("gpgv refused %s's InRelease (rc %d): %s" % (SUITE, res.returncode, res.stderr.decode(errors="replace").strip()))
    text = res.stdout.decode()
    codename = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Codename:")), None)
    if codename != SUITE:
        raise TrustError("the signed Release names codename %r, not %s" % (codename, SUITE))
    return text


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
    package, version, pinned = CONTAINERD
    name = "%s_%s_amd64.deb" % (package, version)
    cached = os.path.join(cache, name)
    # a cached copy is used only while it is the pinned package; otherwise it is fetched again
    if not (os.path.exists(cached) and digest(cached, "sha256") == pinned):
        release = verified_release(fetch)
        index = fetch("%s/dists/%s/%s" % (DEBIAN, SUITE, INDEX))
        if sha256(index) != release_sha256(release, INDEX):
            raise TrustError("%s/%s does not match the sha256 its signed Release gives it" % (SUITE, INDEX))
        entry = stanza(lzma.decompress(index).decode(), package, version)
        data = fetch("%s/%s" % (DEBIAN, entry["Filename"]))
        if sha256(data) != entry["SHA256"]:
            raise TrustError("%s does not match the sha256 of %s's signed index" % (entry["Filename"], SUITE))
        if entry["SHA256"] != pinned:
            raise TrustError(
                "%s's signed index gives %s %s the sha256 %s, not the pinned %s" % (SUITE, package, version, entry["SHA256"], pinned)
            )
        with open(cached, "wb") as fh:
            fh.write(data)
    out = os.path.join(pool, name)
    shutil.copyfile(cached, out)
    return [out]
