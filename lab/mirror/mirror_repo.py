"""The lab mirror's repositories: debs built from package definitions, the real Debian packages
fetched with apt-get download, signed apt indexes (suite and flat). Part of lab/mirror/build.py."""

from __future__ import annotations

import gzip
import hashlib
import os
import subprocess
import tempfile
import time

# what the roles install from the distro, plus the dependencies the lab image lacks
DISTRO_PACKAGES = (
    "prometheus-node-exporter",
    "rdma-core",
    "ibverbs-providers",
    "ibverbs-utils",
    "infiniband-diags",
    "rdmacm-utils",
    "perftest",
    "libpci3",
    "pciutils",
    "pci.ids",
    "libibverbs1",
    "librdmacm1",
    "libibmad5",
    "libibnetdisc5",
    "libibumad3",
    "libnl-3-200",
    "libnl-route-3-200",
    "lsb-base",
    "udev",
    # model_storage: the real NFS client tools (the lab diverts mount.nfs to hwsim's: no kernel NFS)
    "nfs-common",
    "rpcbind",
    "keyutils",
    "libnfsidmap1",
    "libevent-core-2.1-7",
    # model_storage's local cache: the real mdadm and xfsprogs packages (their binaries are shadowed
    # by hwsim's on the lab's PATH: a container cannot assemble or format a block device) and what
    # they need beyond the lab image
    "mdadm",
    "xfsprogs",
    "libinih1",
    "liburcu8",
    "libdevmapper1.02.1",
    "dmsetup",
    "libedit2",
    "libicu72",
    "libbsd0",
    "libmd0",
    # container_runtime: the real containerd and runc; python3-yaml for the Kubernetes stand-ins
    "containerd",
    "runc",
    "python3-yaml",
    "libyaml-0-2",
    # monitoring_server: Prometheus and Alertmanager, and what Debian's prometheus needs beyond
    # the lab image (its web UI's javascript, perl for javascript-common's tooling)
    "prometheus",
    "prometheus-alertmanager",
    "adduser",
    "tzdata",
    "fonts-glyphicons-halflings",
    "javascript-common",
    "libjs-bootstrap",
    "libjs-bootstrap4",
    "libjs-d3",
    "libjs-eonasdan-bootstrap-datetimepicker",
    "libjs-jquery",
    "libjs-jquery-hotkeys",
    "libjs-moment",
    "libjs-moment-timezone",
    "libjs-mustache",
    "libjs-popper.js",
    "libjs-rickshaw",
    "libfile-find-rule-perl",
    "libnumber-compare-perl",
    "libtext-glob-perl",
    "perl",
    "perl-modules-5.36",
    "libperl5.36",
    "libgdbm-compat4",
    "libgdbm6",
    # host_firewall
    "nftables",
    "libnftables1",
    "libnftnl11",
    "libjansson4",
)


def file_mode(rel):
    return 0o755 if "/bin/" in "/" + rel else 0o644


def build_deb(pkg, pool):
    arch = pkg.get("Architecture", "all")
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)  # the package's ./ (dpkg leaves an existing / as it is)
        os.makedirs(os.path.join(tmp, "DEBIAN"))
        for rel, content in pkg["files"].items():
            path = os.path.join(tmp, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as fh:
                fh.write(content.encode() if isinstance(content, str) else content)
            os.chmod(path, file_mode(rel))
        control = [
            "Package: %s" % pkg["Package"],
            "Version: %s" % pkg["Version"],
            "Architecture: %s" % arch,
            "Maintainer: rackforge lab <lab@rackforge.invalid>",
            "Section: non-free/libs",
            "Priority: optional",
            *(["%s: %s" % (field, pkg[field]) for field in ("Depends", "Conflicts", "Replaces") if pkg.get(field)]),
            "Description: %s" % pkg["Description"],
        ]
        with open(os.path.join(tmp, "DEBIAN", "control"), "w") as fh:
            fh.write("\n".join(control) + "\n")
        for script in ("postinst", "postrm"):
            if pkg.get(script):
                path = os.path.join(tmp, "DEBIAN", script)
                with open(path, "w") as fh:
                    fh.write(pkg[script])
                os.chmod(path, 0o755)
        out = os.path.join(pool, "%s_%s_%s.deb" % (pkg["Package"], pkg["Version"], arch))
        subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", tmp, out], check=True, stdout=subprocess.DEVNULL)
        return out


def distro_debs(pool):
    """The real Debian packages of DISTRO_PACKAGES, downloaded into the pool."""
    cmd = ["apt-get", "download", "-q", "-o", "APT::Sandbox::User=root", *DISTRO_PACKAGES]
    if subprocess.run(cmd, check=False, cwd=pool, stdout=subprocess.DEVNULL).returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], check=True)  # stale package lists
        subprocess.run(cmd, check=True, cwd=pool, stdout=subprocess.DEVNULL)
    return sorted(os.path.join(pool, f) for f in os.listdir(pool) if f.endswith(".deb") and f.split("_")[0] in DISTRO_PACKAGES)


def index_entry(deb, repo):
    """The deb's stanza of the Packages index."""
    control = subprocess.run(["dpkg-deb", "-f", deb], check=True, capture_output=True, text=True).stdout.rstrip("\n")
    return "%s\nFilename: %s\nSize: %d\nMD5sum: %s\nSHA256: %s\n" % (
        control,
        os.path.relpath(deb, repo),
        os.path.getsize(deb),
        digest(deb, "md5"),
        digest(deb, "sha256"),
    )


def digest(path, algo):
    h = hashlib.new(algo)
    with open(path, "rb") as fh:
        h.update(fh.read())
    return h.hexdigest()


def gpg(home, *args, **kw):
    return subprocess.run(["gpg", "--batch", "--quiet", "--homedir", home, *args], check=True, **kw)


def write_repo(repo, label, debs_for_pool, home):
    """A signed apt repository (suite bookworm, component main) at repo/ with the debs that
    debs_for_pool(pool) puts into its pool; returns how many packages it holds."""
    pool = os.path.join(repo, "pool", "main")
    bindir = os.path.join(repo, "dists", "bookworm", "main", "binary-amd64")
    os.makedirs(pool)
    os.makedirs(bindir)
    entries = [index_entry(deb, repo) for deb in debs_for_pool(pool)]
    packages_path = os.path.join(bindir, "Packages")
    with open(packages_path, "w") as fh:
        fh.write("\n".join(entries))
    with open(packages_path, "rb") as fin, gzip.open(packages_path + ".gz", "wb") as fout:
        fout.write(fin.read())
    dist = os.path.join(repo, "dists", "bookworm")
    lines = [
        "Origin: rackforge-lab",
        "Label: %s" % label,
        "Suite: bookworm",
        "Codename: bookworm",
        "Date: %s" % time.strftime("%a, %d %b %Y %H:%M:%S UTC", time.gmtime()),
        "Architectures: amd64 all",
        "Components: main",
        "SHA256:",
    ]
    for rel in ("main/binary-amd64/Packages", "main/binary-amd64/Packages.gz"):
        path = os.path.join(dist, rel)
        lines.append(" %s %d %s" % (digest(path, "sha256"), os.path.getsize(path), rel))
    with open(os.path.join(dist, "Release"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    gpg(home, "--yes", "--clearsign", "-o", os.path.join(dist, "InRelease"), os.path.join(dist, "Release"))
    gpg(home, "--yes", "-abs", "-o", os.path.join(dist, "Release.gpg"), os.path.join(dist, "Release"))
    return len(entries)


def write_flat_repo(repo, home):
    """A flat apt repository (`deb URL /`, as pkgs.k8s.io publishes) over the debs in repo/."""
    entries = [index_entry(os.path.join(repo, f), repo) for f in sorted(os.listdir(repo)) if f.endswith(".deb")]
    with open(os.path.join(repo, "Packages"), "w") as fh:
        fh.write("\n".join(entries))
    with open(os.path.join(repo, "Packages"), "rb") as fin, gzip.open(os.path.join(repo, "Packages.gz"), "wb") as fout:
        fout.write(fin.read())
    lines = ["Origin: rackforge-lab", "Label: rackforge lab kubernetes mirror (SIMULATED packages)", "Architectures: amd64 all", "SHA256:"]
    for rel in ("Packages", "Packages.gz"):
        lines.append(" %s %d %s" % (digest(os.path.join(repo, rel), "sha256"), os.path.getsize(os.path.join(repo, rel)), rel))
    with open(os.path.join(repo, "Release"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    gpg(home, "--yes", "--clearsign", "-o", os.path.join(repo, "InRelease"), os.path.join(repo, "Release"))
    with open(os.path.join(repo, "Release.key"), "w") as fh:
        gpg(home, "--armor", "--export", stdout=fh)
