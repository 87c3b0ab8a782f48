"""The Debian base image of the node and of the project's images, made by debootstrap.

No image registry is reachable here: the base is bootstrapped (--variant=minbase) from the mirror
apt already uses, slimmed as Debian's -slim images are, and committed under the very name the
Dockerfiles' `ARG BASE_IMAGE` defaults to (versions.BASE_IMAGE), so `FROM` resolves locally and
nothing is pulled. Each stage of debootstrap opens a span of the caller's reporter.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from rillet_devstack import imagestore, reporting, versions
from rillet_devstack.commands import run_logged

# debootstrap prints `I: <Verb> <package>` hundreds of times; the verb names the stage.
_DEBOOTSTRAP_STAGES = {
    "Retrieving": "debootstrap: download packages",
    "Validating": "debootstrap: download packages",
    "Extracting": "debootstrap: extract packages",
    "Installing": "debootstrap: install packages",
    "Unpacking": "debootstrap: install packages",
    "Configuring": "debootstrap: configure packages",
}


def debootstrap_stage(line: str) -> str | None:
    """The stage a line of debootstrap's output belongs to, if it names one."""
    if not line.startswith("I: "):
        return None
    verb = line[3:].split(" ", 1)[0]
    return _DEBOOTSTRAP_STAGES.get(verb)


@dataclass(frozen=True)
class AptSource:
    """One `deb` entry of the host's apt configuration."""

    uri: str
    suites: tuple[str, ...]
    components: tuple[str, ...]


def _deb822_stanzas(text: str) -> Iterator[dict[str, str]]:
    fields: dict[str, str] = {}
    for line in [*text.splitlines(), ""]:
        if line.startswith("#"):
            continue
        if not line.strip():
            if fields:
                yield fields
            fields = {}
        elif line[0].isspace() and fields:
            continue  # a continuation line (a multi-line Signed-By key): not needed here
        elif ":" in line:
            name, value = line.split(":", 1)
            fields[name.strip().lower()] = value.strip()


def parse_deb822_sources(text: str) -> list[AptSource]:
    """The enabled `deb` entries of a deb822 `.sources` file."""
    return [
        AptSource(uri, tuple(stanza["suites"].split()), tuple(stanza["components"].split()))
        for stanza in _deb822_stanzas(text)
        if "deb" in stanza.get("types", "").split()
        and stanza.get("enabled", "yes").lower() != "no"
        and "suites" in stanza
        for uri in stanza.get("uris", "").split()
    ]


def parse_one_line_sources(text: str) -> list[AptSource]:
    """The `deb` lines of a one-line-style sources.list (options in brackets skipped)."""
    found = []
    for line in text.splitlines():
        line = re.sub(r"\[[^]]*\]", " ", line.split("#", 1)[0])
        words = line.split()
        if len(words) >= 3 and words[0] == "deb":
            found.append(AptSource(words[1], (words[2],), tuple(words[3:])))
    return found


def host_apt_sources(etc_apt: Path = Path("/etc/apt")) -> list[AptSource]:
    """Every `deb` entry the host's apt uses."""
    found = []
    if (etc_apt / "sources.list").exists():
        found += parse_one_line_sources((etc_apt / "sources.list").read_text())
    for path in sorted((etc_apt / "sources.list.d").glob("*.list")):
        found += parse_one_line_sources(path.read_text())
    for path in sorted((etc_apt / "sources.list.d").glob("*.sources")):
        found += parse_deb822_sources(path.read_text())
    return found


class NoMirrorError(RuntimeError):
    """The host's apt configuration names no mirror of the Debian release to bootstrap."""


def release_sources(sources: Iterable[AptSource], release: str) -> list[AptSource]:
    """The entries serving this release: the release itself, -updates, -security and so on."""
    return [
        AptSource(s.uri, suites, s.components)
        for s in sources
        if (suites := tuple(x for x in s.suites if x == release or x.startswith(f"{release}-")))
    ]


def bootstrap_mirror(sources: Iterable[AptSource], release: str) -> str:
    """The mirror to debootstrap from: the first serving the release's main suite."""
    for source in sources:
        if release in source.suites and "main" in source.components:
            return source.uri
    raise NoMirrorError(f"no `deb` source for Debian {release} main in /etc/apt")


def render_deb822_sources(sources: Iterable[AptSource]) -> str:
    """A deb822 sources file for the image, signed by the keyring debootstrap installs."""
    return "\n".join(
        f"Types: deb\nURIs: {s.uri}\nSuites: {' '.join(s.suites)}\n"
        f"Components: {' '.join(s.components)}\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
        for s in sources
    )


# What debian's -slim images leave out, kept out of later apt installs too (dpkg path-exclude);
# removed from the bootstrapped tree with the same patterns.
SLIM_DPKG_CONFIG = """\
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
"""
# No downloaded .debs or binary caches kept after an install, no translated package lists.
_APT_CLEAN = "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb" + (
    " /var/cache/apt/*.bin || true"
)
SLIM_APT_CONFIG = f"""\
DPkg::Post-Invoke {{ "{_APT_CLEAN}"; }};
APT::Update::Post-Invoke {{ "{_APT_CLEAN}"; }};
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
Acquire::Languages "none";
"""
# Host files debootstrap copies in (the runtime provides its own), caches and logs.
ROOTFS_REMOVALS = (
    "etc/resolv.conf",
    "etc/hostname",
    "etc/apt/sources.list",
    "var/cache/apt/archives/*.deb",
    "var/cache/apt/*.bin",
    "var/lib/apt/lists/*",
    "var/log/*.log",
    "var/log/apt/*",
    "run/*",
    "tmp/*",
)


def slim_removals(dpkg_config: str = SLIM_DPKG_CONFIG) -> tuple[list[str], list[str]]:
    """The (exclude, include) glob patterns of a dpkg path-exclude config, without the root /."""
    excluded: list[str] = []
    included: list[str] = []
    for line in dpkg_config.splitlines():
        kind, _, pattern = line.partition(" ")
        (excluded if kind == "path-exclude" else included).append(pattern.lstrip("/"))
    return excluded, included


def _remove_matching(rootfs: Path, patterns: Iterable[str], keep: Iterable[str] = ()) -> None:
    """Delete what the glob patterns match under rootfs, except what `keep` patterns match."""
    kept = {path for pattern in keep for path in rootfs.glob(pattern)}
    inside = rootfs.resolve()
    for pattern in patterns:
        for path in rootfs.glob(pattern):
            # The tree has absolute symlinks (var/run -> /run): never follow one onto the host.
            if not path.parent.resolve().is_relative_to(inside):
                raise RuntimeError(f"{path} leads out of {rootfs}")
            _remove_except(path, kept)


def _remove_except(path: Path, kept: set[Path]) -> None:
    if path in kept:
        return
    if not path.is_dir() or path.is_symlink():
        path.unlink()
    elif any(k.is_relative_to(path) for k in kept):
        for child in path.iterdir():  # a kept file inside: remove around it
            _remove_except(child, kept)
    else:
        shutil.rmtree(path)


def _slim_rootfs(rootfs: Path, sources: list[AptSource]) -> None:
    excluded, included = slim_removals()
    _remove_matching(rootfs, [*excluded, *ROOTFS_REMOVALS], keep=included)
    (rootfs / "etc/dpkg/dpkg.cfg.d/rillet-slim").write_text(SLIM_DPKG_CONFIG)
    (rootfs / "etc/apt/apt.conf.d/rillet-slim").write_text(SLIM_APT_CONFIG)
    (rootfs / "etc/apt/sources.list.d/debian.sources").write_text(render_deb822_sources(sources))


def _unmount_below(root: Path) -> None:
    """Unmount whatever is still mounted under `root` (an interrupted debootstrap's /proc), so
    deleting the tree can never reach into a mounted filesystem."""
    mounts = Path("/proc/self/mounts").read_text().splitlines()
    targets = [Path(line.split()[1]) for line in mounts]
    for target in sorted((t for t in targets if t.is_relative_to(root)), reverse=True):
        subprocess.run(["umount", "--lazy", str(target)], capture_output=True, check=False)


def _debootstrap(rootfs: Path, *, mirror: str, spans: reporting.Spans) -> None:
    spans.start("debootstrap: resolve packages")
    try:
        run_logged(
            ["debootstrap", "--variant=minbase", versions.DEBIAN_RELEASE, rootfs, mirror],
            log=imagestore.build_log("base"),
            on_line=reporting.stage_changes(spans, debootstrap_stage),
        )
    finally:
        _unmount_below(rootfs)


def _rootfs_tar(key: str, sources: list[AptSource], mirror: str, spans: reporting.Spans) -> Path:
    """The slimmed, bootstrapped tree as a tar, cached by key (made unless present)."""
    cached = imagestore.images_dir() / f"base-{versions.DEBIAN_RELEASE}-{key[:12]}" / "rootfs.tar"
    if cached.exists():
        return cached
    scratch = imagestore.images_dir() / "build" / "base"
    _unmount_below(scratch)
    shutil.rmtree(scratch, ignore_errors=True)
    rootfs = scratch / "rootfs"
    rootfs.mkdir(parents=True)
    _debootstrap(rootfs, mirror=mirror, spans=spans)
    spans.start("slim down and pack the root filesystem")
    _slim_rootfs(rootfs, sources)
    tar = scratch / "rootfs.tar"
    run_logged(
        ["tar", "--numeric-owner", "--xattrs", "--xattrs-include=*",
         "--exclude=./dev/*", "--exclude=./proc/*", "--exclude=./sys/*",
         "-C", rootfs, "-cf", tar, "."],
        log=imagestore.build_log("base"),
    )  # fmt: skip
    cached.parent.mkdir(parents=True, exist_ok=True)
    tar.rename(cached)  # complete: an interrupted build never leaves a partial tar here
    shutil.rmtree(scratch, ignore_errors=True)
    return cached


# As the Debian images on public registries are configured.
BASE_CONFIG = (
    "--cmd",
    "bash",
    "--env",
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
)


def rootfs_key(sources: Iterable[AptSource], mirror: str) -> str:
    """What the root filesystem is made of: the release, where its packages come from, and
    the slimming. (The packages' versions are the mirror's of the day: not part of the key.)"""
    return imagestore.digest(
        "rootfs",
        versions.DEBIAN_RELEASE,
        mirror,
        render_deb822_sources(sources),
        SLIM_DPKG_CONFIG,
        SLIM_APT_CONFIG,
        *ROOTFS_REMOVALS,
    )


def build_base(*, report: reporting.Reporter = reporting.silent) -> str:
    """The Debian base (versions.BASE_IMAGE) from debootstrap --variant=minbase; its name.

    Cached twice: the image (by a label with the key of its recipe) and the root filesystem tar
    under the cache directory, so a lost image store costs a commit rather than a bootstrap.
    """
    reference = versions.BASE_IMAGE
    sources = release_sources(host_apt_sources(), versions.DEBIAN_RELEASE)
    mirror = bootstrap_mirror(sources, versions.DEBIAN_RELEASE)
    tree = rootfs_key(sources, mirror)
    key = imagestore.digest("base", tree, *BASE_CONFIG)
    if imagestore.cached(reference, key):
        return reference
    with reporting.Spans(report, f"base image {versions.DEBIAN_RELEASE}: ") as spans:
        tar = _rootfs_tar(tree, sources, mirror, spans)
        spans.start(f"commit {reference}")
        imagestore.commit_scratch(
            reference=reference,
            key=key,
            files=[("add", tar, "/")],
            config=BASE_CONFIG,
            log=imagestore.build_log("base"),
        )
    return reference
