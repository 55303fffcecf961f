"""The lab mirror takes Debian 13's containerd only through Debian's own trust chain: an InRelease
gpgv accepts, the Packages.xz whose sha256 it lists, the .deb whose sha256 that index gives. Here a
throwaway key plays Debian's (no network); each broken link must stop the build."""

from __future__ import annotations

import hashlib
import importlib.util
import lzma
import subprocess
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "lab" / "mirror"))  # as build.py does: the mirror_* modules import each other
spec = importlib.util.spec_from_file_location("mirror_trixie", ROOT / "lab" / "mirror" / "mirror_trixie.py")
mt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mt)

PKG, VERSION, _PINNED = mt.CONTAINERD
DEB = b"!<arch>\nnot really a deb, but bytes with a sha256\n"


@pytest.fixture(autouse=True)
def pinned(monkeypatch):
    """These bytes play the pinned package."""
    monkeypatch.setattr(mt, "CONTAINERD", (PKG, VERSION, hashlib.sha256(DEB).hexdigest()))


def gpg(home, *args, **kw):
    return subprocess.run(["gpg", "--batch", "--quiet", "--homedir", str(home), *args], check=True, capture_output=True, **kw)


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    """(keyring, sign(text) -> InRelease bytes) of a throwaway archive key."""
    home = tmp_path_factory.mktemp("gnupg")
    home.chmod(0o700)
    gpg(home, "--passphrase", "", "--quick-generate-key", "test archive <a@example.invalid>", "ed25519", "sign", "never")
    keyring = home / "keyring.gpg"
    keyring.write_bytes(gpg(home, "--export").stdout)

    def sign(text):
        return gpg(home, "--clearsign", input=text.encode()).stdout

    return str(keyring), sign


def served(sign, deb=DEB, index_sha=None, stanza_version=VERSION, prepend=b"", index_deb_sha=None, codename="trixie"):
    filename = "pool/main/c/containerd/%s_%s_amd64.deb" % (PKG, stanza_version)
    packages = "Package: other\nVersion: 1\n\nPackage: %s\nVersion: %s\nFilename: %s\nSHA256: %s\n" % (
        PKG,
        stanza_version,
        filename,
        index_deb_sha or hashlib.sha256(DEB).hexdigest(),
    )
    xz = lzma.compress(packages.encode())
    release = "Origin: Debian\nSuite: stable\nCodename: %s\nSHA256:\n %s %d %s\n" % (
        codename,
        index_sha or hashlib.sha256(xz).hexdigest(),
        len(xz),
        mt.INDEX,
    )
    files = {
        "%s/dists/%s/InRelease" % (mt.DEBIAN, mt.SUITE): prepend + sign(release),
        "%s/dists/%s/%s" % (mt.DEBIAN, mt.SUITE, mt.INDEX): xz,
        "%s/%s" % (mt.DEBIAN, filename): deb,
    }
    fetched = []

    def fetch(url):
        fetched.append(url)
        return files[url]

    return fetch, fetched


def run(tmp_path, keyring, fetch):
    pool, cache = tmp_path / "pool", tmp_path / "cache"
    pool.mkdir(exist_ok=True)
    original = mt.verified_release
    mt.verified_release = lambda f: original(f, keyring=keyring)
    try:
        return mt.trixie_debs(str(pool), str(cache), fetch)
    finally:
        mt.verified_release = original


def test_a_verified_package_lands_in_the_pool_and_is_reused_from_the_cache(tmp_path, archive):
    keyring, sign = archive
    fetch, fetched = served(sign)
    [out] = run(tmp_path, keyring, fetch)
    assert open(out, "rb").read() == DEB and len(fetched) == 3
    fetch2, fetched2 = served(sign)
    run(tmp_path, keyring, fetch2)
    assert fetched2 == []  # the cached copy is the pinned package
    (tmp_path / "cache" / ("%s_%s_amd64.deb" % (PKG, VERSION))).write_bytes(b"tampered in the cache")
    fetch3, fetched3 = served(sign)
    [out] = run(tmp_path, keyring, fetch3)
    assert open(out, "rb").read() == DEB and len(fetched3) == 3  # not the pin: fetched and checked again


@pytest.mark.parametrize(
    "broken, why",
    [
        ({"deb": b"tampered"}, "does not match the sha256 of trixie's signed index"),
        ({"index_sha": "0" * 64}, "does not match the sha256 its signed Release gives it"),
        ({"stanza_version": "1.7.24~ds1-6+deb13u2"}, "is not in trixie main any more"),
        ({"deb": b"another", "index_deb_sha": hashlib.sha256(b"another").hexdigest()}, "not the pinned"),
        ({"codename": "sid"}, "names codename 'sid', not trixie"),
    ],
)
def test_each_broken_link_of_the_chain_stops_the_build(tmp_path, archive, broken, why):
    keyring, sign = archive
    fetch, _ = served(sign, **broken)
    with pytest.raises(mt.TrustError, match=why):
        run(tmp_path, keyring, fetch)
    assert not (tmp_path / "pool" / ("%s_%s_amd64.deb" % (PKG, VERSION))).exists()


def test_text_outside_the_signature_is_not_read(tmp_path, archive):
    # gpgv accepts an InRelease with unsigned text before the armor: a forged SHA256 section
    # there, for a tampered index, must not be what the index is checked against
    keyring, sign = archive
    bad = lzma.compress(b"Package: containerd\n")
    forged = ("SHA256:\n %s %d %s\n\n" % (hashlib.sha256(bad).hexdigest(), len(bad), mt.INDEX)).encode()
    fetch, _ = served(sign, prepend=forged)
    fetch_index = "%s/dists/%s/%s" % (mt.DEBIAN, mt.SUITE, mt.INDEX)

    def tampered(url):
        return bad if url == fetch_index else fetch(url)

    with pytest.raises(mt.TrustError, match="does not match the sha256 its signed Release gives it"):
        run(tmp_path, keyring, tampered)


def test_an_inrelease_signed_by_another_key_is_refused(tmp_path, archive, tmp_path_factory):
    keyring, _sign = archive
    other = tmp_path_factory.mktemp("other")
    other.chmod(0o700)
    gpg(other, "--passphrase", "", "--quick-generate-key", "not debian <x@example.invalid>", "ed25519", "sign", "never")
    fetch, _ = served(lambda text: gpg(other, "--clearsign", input=text.encode()).stdout)
    with pytest.raises(mt.TrustError, match="gpgv refused trixie's InRelease"):
        run(tmp_path, keyring, fetch)
