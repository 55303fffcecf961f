"""The lab mirror takes Debian 13's containerd only through Debian's own trust chain: an InRelease
gpgv accepts, the Packages.xz whose sha256 it lists, the .deb whose sha256 that index gives. Here a
throwaway key plays Debian's (no network); each broken link must stop the build."""

from __future__ import annotations

import hashlib
import importlib.util
import lzma
import subprocess

import pytest
from conftest import ROOT

spec = importlib.util.spec_from_file_location("mirror_trixie", ROOT / "lab" / "mirror" / "mirror_trixie.py")
mt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mt)

PKG, VERSION = mt.CONTAINERD
DEB = b"!<arch>\nnot really a deb, but bytes with a sha256\n"


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


def served(sign, deb=DEB, index_sha=None, stanza_version=VERSION):
    filename = "pool/main/c/containerd/%s_%s_amd64.deb" % (PKG, stanza_version)
    packages = "Package: other\nVersion: 1\n\nPackage: %s\nVersion: %s\nFilename: %s\nSHA256: %s\n" % (
        PKG,
        stanza_version,
        filename,
        hashlib.sha256(DEB).hexdigest(),
    )
    xz = lzma.compress(packages.encode())
    release = "Origin: Debian\nSuite: stable\nSHA256:\n %s %d %s\n" % (index_sha or hashlib.sha256(xz).hexdigest(), len(xz), mt.INDEX)
    files = {
        "%s/dists/%s/InRelease" % (mt.DEBIAN, mt.SUITE): sign(release),
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
    assert fetched2 == []  # the cached copy still matches the sha256 it was checked against


@pytest.mark.parametrize(
    "broken, why",
    [
        ({"deb": b"tampered"}, "does not match the sha256 of trixie's signed index"),
        ({"index_sha": "0" * 64}, "does not match the sha256 its signed Release gives it"),
        ({"stanza_version": "1.7.24~ds1-6+deb13u2"}, "is not in trixie main any more"),
    ],
)
def test_each_broken_link_of_the_chain_stops_the_build(tmp_path, archive, broken, why):
    keyring, sign = archive
    fetch, _ = served(sign, **broken)
    with pytest.raises(mt.TrustError, match=why):
        run(tmp_path, keyring, fetch)
    assert not (tmp_path / "pool" / ("%s_%s_amd64.deb" % (PKG, VERSION))).exists()


def test_an_inrelease_signed_by_another_key_is_refused(tmp_path, archive, tmp_path_factory):
    keyring, _sign = archive
    other = tmp_path_factory.mktemp("other")
    other.chmod(0o700)
    gpg(other, "--passphrase", "", "--quick-generate-key", "not debian <x@example.invalid>", "ed25519", "sign", "never")
    fetch, _ = served(lambda text: gpg(other, "--clearsign", input=text.encode()).stdout)
    with pytest.raises(mt.TrustError, match="gpgv refused trixie's InRelease"):
        run(tmp_path, keyring, fetch)
