"""Container images of the local stack, built from Debian packages and imported into containerd.

No image registry is reachable here, so every image the node runs is built on this machine:

- the pause (sandbox) image: a static C program (images/pause/pause.c) in a `FROM scratch` image;
- a Debian base made by debootstrap from the mirror apt already uses, committed under the very name
  the Dockerfiles' `ARG BASE_IMAGE` defaults to (versions.BASE_IMAGE), so `FROM` resolves locally
  and nothing is pulled;
- the project's images/operator and images/runtime Dockerfiles, built as written by `buildah bud`
  and tagged with a hash of everything that goes into them, so an unchanged image is not rebuilt.

Package downloads inside a build go through a TLS-intercepting proxy whose CA only the host
trusts. Each RUN step therefore gets a home directory for root, mounted over /root, holding copies
of the host's CA bundle and Java cacerts and the pip and Maven user configurations that point at
them: neither the Dockerfiles nor the images know about it, and nothing of it is committed
(checked after each build).

Each long step is reported as it happens: every `STEP` buildah announces, and each stage of
debootstrap, opens a span of the caller's reporter (the `stack.Reporter` shape).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from rillet_devstack import paths, versions
from rillet_devstack.commands import CommandFailedError, run_logged

if TYPE_CHECKING:
    # Only the type: stack imports this module, so a runtime import would be circular.
    from rillet_devstack.stack import Reporter

REPOSITORY = Path(__file__).resolve().parents[2]
PAUSE_SOURCE = REPOSITORY / "images" / "pause" / "pause.c"
PROJECT_IMAGES = ("operator", "runtime")
PROJECT_REPOSITORY = "localhost/rillet"

# Labels on the images this module commits, to recognise a cached one.
KEY_LABEL = "io.rillet.build-key"
# The label an imported image gets in containerd: the buildah image id it was imported from.
IMPORTED_ID_LABEL = "io.rillet.image-id"
CONTAINERD_NAMESPACE = "k8s.io"

# Root's home in a build's RUN steps (a volume), and the folder in it with the host's CAs.
BUILD_HOME = "/root"
BUILD_TRUST = ".rillet-build-trust"
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
HOST_JAVA_CACERTS = Path("/etc/ssl/certs/java/cacerts")


def _quiet(_: str) -> AbstractContextManager[None]:
    return contextlib.nullcontext()


def _images_dir() -> Path:
    return paths.cache_dir() / "images"


def _log(name: str) -> Path:
    return _images_dir() / "logs" / f"{name}.log"


def _digest(*parts: bytes | str) -> str:
    """sha256 over length-prefixed parts, so that ("ab", "c") and ("a", "bc") differ."""
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        digest.update(f"{len(data)}:".encode())
        digest.update(data)
    return digest.hexdigest()


# --- Progress --------------------------------------------------------------------------------


class Spans:
    """One reporter span at a time: a new step closes the previous one (reporters cannot nest,
    rich allows one live status at a time). A failure ends the open span with the error."""

    def __init__(self, report: Reporter, prefix: str) -> None:
        self._report = report
        self._prefix = prefix
        self._open = contextlib.ExitStack()

    def start(self, label: str) -> None:
        self._open.close()
        self._open.enter_context(self._report(f"{self._prefix}{label}"))

    def __enter__(self) -> Spans:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        return bool(self._open.__exit__(kind, error, traceback))


_BUILDAH_STEP = re.compile(r"^(\[\d+/\d+\] )?STEP (\d+/\d+): (.*)$")
STEP_LABEL_WIDTH = 90


def buildah_step(line: str) -> str | None:
    """The span label for a line of `buildah bud` output that starts a step, else None."""
    match = _BUILDAH_STEP.match(line)
    if match is None:
        return None
    stage, step, instruction = match.groups()
    label = f"{stage or ''}step {step}: {' '.join(instruction.split())}"
    return label if len(label) <= STEP_LABEL_WIDTH else label[: STEP_LABEL_WIDTH - 3] + "..."


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


def stage_changes(spans: Spans, stage_of: Callable[[str], str | None]) -> Callable[[str], None]:
    """An `on_line` callback opening a span each time `stage_of` names a different stage."""
    current: list[str | None] = [None]

    def on_line(line: str) -> None:
        stage = stage_of(line)
        if stage is not None and stage != current[0]:
            current[0] = stage
            spans.start(stage)

    return on_line


# --- Buildah and containerd queries ----------------------------------------------------------


@dataclass(frozen=True)
class LocalImage:
    """An image in buildah's store: its id and labels."""

    image_id: str
    labels: Mapping[str, str]


def local_image(reference: str) -> LocalImage | None:
    """The image buildah stores under this name, or None."""
    found = subprocess.run(
        ["buildah", "inspect", "--type", "image", reference],
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode != 0:
        return None
    inspected = json.loads(found.stdout)
    labels = (inspected.get("OCIv1", {}).get("config") or {}).get("Labels") or {}
    return LocalImage(image_id=inspected["FromImageID"], labels=labels)


def _cached(reference: str, key: str) -> LocalImage | None:
    image = local_image(reference)
    return image if image and image.labels.get(KEY_LABEL) == key else None


def _buildah(*args: str | Path, log: Path) -> str:
    """Run a buildah command that prints one thing (a container name, an id); return it."""
    log.parent.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        ["buildah", *map(str, args)], capture_output=True, text=True, check=False
    )
    with log.open("a") as out:
        out.write(f"\n$ buildah {' '.join(map(str, args))}\n{result.stdout}{result.stderr}")
    if result.returncode != 0:
        raise CommandFailedError(f"buildah {args[0]} exited {result.returncode}: {result.stderr}")
    return result.stdout.strip()


@contextlib.contextmanager
def _scratch_container(log: Path) -> Iterator[str]:
    """A `FROM scratch` working container, removed afterwards whatever happens."""
    container = _buildah("from", "--pull=never", "scratch", log=log)
    try:
        yield container
    finally:
        subprocess.run(["buildah", "rm", container], capture_output=True, check=False)


def _commit_scratch(
    *,
    reference: str,
    key: str,
    files: Iterable[tuple[str, Path, str]],
    config: Iterable[str],
    log: Path,
) -> str:
    """Commit a `FROM scratch` image of these (buildah verb, source, destination) additions."""
    with _scratch_container(log) as container:
        for verb, source, destination in files:
            _buildah(verb, container, source, destination, log=log)
        _buildah("config", *config, "--label", f"{KEY_LABEL}={key}", container, log=log)
        return _buildah("commit", "--quiet", container, reference, log=log)


# --- The pause image -------------------------------------------------------------------------


# 65535: the nobody-like user the upstream pause image runs as.
PAUSE_CONFIG = ("--entrypoint", '["/pause"]', "--user", "65535:65535")


def build_pause(*, source: Path = PAUSE_SOURCE, report: Reporter = _quiet) -> str:
    """The node's sandbox image (versions.PAUSE_IMAGE) from a static C program; its name.

    Cached by the program's source: an unchanged one is not compiled again.
    """
    reference = versions.PAUSE_IMAGE
    key = _digest("pause", source.read_bytes(), *PAUSE_CONFIG)
    if _cached(reference, key):
        return reference
    with report(f"pause image {reference}: gcc -static, commit"):
        scratch = _images_dir() / "build" / "pause"
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True)
        binary = scratch / "pause"
        run_logged(["gcc", "-Os", "-static", "-s", "-o", binary, source], log=_log("pause"))
        _commit_scratch(
            reference=reference,
            key=key,
            files=[("copy", binary, "/pause")],
            config=PAUSE_CONFIG,
            log=_log("pause"),
        )
        shutil.rmtree(scratch, ignore_errors=True)
    return reference


# --- The Debian base image -------------------------------------------------------------------


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


def _debootstrap(rootfs: Path, *, mirror: str, spans: Spans) -> None:
    spans.start("debootstrap: resolve packages")
    try:
        run_logged(
            ["debootstrap", "--variant=minbase", versions.DEBIAN_RELEASE, rootfs, mirror],
            log=_log("base"),
            on_line=stage_changes(spans, debootstrap_stage),
        )
    finally:
        _unmount_below(rootfs)


def _rootfs_tar(key: str, sources: list[AptSource], mirror: str, spans: Spans) -> Path:
    """The slimmed, bootstrapped tree as a tar, cached by key (made unless present)."""
    cached = _images_dir() / f"base-{versions.DEBIAN_RELEASE}-{key[:12]}" / "rootfs.tar"
    if cached.exists():
        return cached
    scratch = _images_dir() / "build" / "base"
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
        log=_log("base"),
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
    return _digest(
        "rootfs",
        versions.DEBIAN_RELEASE,
        mirror,
        render_deb822_sources(sources),
        SLIM_DPKG_CONFIG,
        SLIM_APT_CONFIG,
        *ROOTFS_REMOVALS,
    )


def build_base(*, report: Reporter = _quiet) -> str:
    """The Debian base (versions.BASE_IMAGE) from debootstrap --variant=minbase; its name.

    Cached twice: the image (by a label with the key of its recipe) and the root filesystem tar
    under the cache directory, so a lost image store costs a commit rather than a bootstrap.
    """
    reference = versions.BASE_IMAGE
    sources = release_sources(host_apt_sources(), versions.DEBIAN_RELEASE)
    mirror = bootstrap_mirror(sources, versions.DEBIAN_RELEASE)
    tree = rootfs_key(sources, mirror)
    key = _digest("base", tree, *BASE_CONFIG)
    if _cached(reference, key):
        return reference
    with Spans(report, f"base image {versions.DEBIAN_RELEASE}: ") as spans:
        tar = _rootfs_tar(tree, sources, mirror, spans)
        spans.start(f"commit {reference}")
        _commit_scratch(
            reference=reference,
            key=key,
            files=[("add", tar, "/")],
            config=BASE_CONFIG,
            log=_log("base"),
        )
    return reference


# --- The project's images --------------------------------------------------------------------

# Generated or cached files that are not part of the sources (nor of an image).
_SKIPPED_DIRECTORIES = {"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", "build"}
_SKIPPED_SUFFIXES = (".pyc", ".pyo", ".egg-info")


def _source_files(root: Path, folder: Path) -> Iterator[Path]:
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(root)
        if any(p in _SKIPPED_DIRECTORIES or p.endswith(_SKIPPED_SUFFIXES) for p in relative.parts):
            continue
        if path.is_file():
            yield path


# The package the images install, all of operator/ their build context holds (setuptools finds
# the packages there): the development stack beside it is no input, and in no image.
PRODUCT_SOURCES = Path("operator") / "rillet"


def image_inputs(repo_root: Path, name: str) -> dict[str, bytes]:
    """Every file of the repository a project image's build context offers, by relative path:
    pyproject.toml, README.md, the product's sources (PRODUCT_SOURCES), the image's own folder
    under images/ and the files shared by all images (images/*)."""
    files = [repo_root / "pyproject.toml", repo_root / "README.md"]
    files += _source_files(repo_root, repo_root / PRODUCT_SOURCES)
    files += _source_files(repo_root, repo_root / "images" / name)
    files += sorted(p for p in (repo_root / "images").iterdir() if p.is_file())
    return {path.relative_to(repo_root).as_posix(): path.read_bytes() for path in files}


TAG_LENGTH = 16


def content_tag(inputs: Mapping[str, bytes], *, base_image_id: str) -> str:
    """The tag of a project image: a hash of its build context and of the base image's id."""
    parts = [part for path in sorted(inputs) for part in (path, inputs[path])]
    return _digest("project-image", base_image_id, *parts)[:TAG_LENGTH]


def project_reference(name: str, tag: str) -> str:
    """The name a project image is built and imported under."""
    return f"{PROJECT_REPOSITORY}/{name}:{tag}"


# Fixed file times in the build context: buildah's layer cache keys a COPY by its content, and
# a staged copy made later must hit the same cache entry.
_CONTEXT_MTIME = 946684800  # 2000-01-01


def _stage_context(inputs: Mapping[str, bytes], context: Path) -> None:
    """Write exactly the hashed inputs as the build context, laid out like the repository."""
    shutil.rmtree(context, ignore_errors=True)
    for relative, content in inputs.items():
        path = context / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        os.utime(path, (_CONTEXT_MTIME, _CONTEXT_MTIME))
    for directory in sorted((p for p in context.rglob("*") if p.is_dir()), reverse=True):
        os.utime(directory, (_CONTEXT_MTIME, _CONTEXT_MTIME))


def pip_config(ca_bundle: str) -> str:
    """~/.config/pip/pip.conf of a build step: trust the mounted copy of the host's CA bundle."""
    return f"[global]\ncert = {ca_bundle}\n"


def maven_rc(truststore: str) -> str:
    """~/.mavenrc of a build step (mvn sources it): trust the mounted copy of Java's cacerts."""
    return (
        f'MAVEN_OPTS="$MAVEN_OPTS -Djavax.net.ssl.trustStore={truststore}'
        ' -Djavax.net.ssl.trustStorePassword=changeit"\n'
    )


def _build_home() -> Path:
    """A home directory for root in the build's RUN steps, holding the host's trust.

    It is mounted over /root, which the base already has: a volume on a path the image lacks
    (/etc/pip.conf) would leave an empty stub of it in the layer. pip and mvn read their user
    configuration from there; whatever a step writes to $HOME (Maven's ~/.m2) stays out of the
    image as well.
    """
    home = _images_dir() / "build-home"
    shutil.rmtree(home, ignore_errors=True)
    trust = home / BUILD_TRUST
    trust.mkdir(parents=True)
    shutil.copyfile(HOST_CA_BUNDLE, trust / "ca-certificates.crt")
    shutil.copyfile(HOST_JAVA_CACERTS, trust / "cacerts")
    (home / ".config" / "pip").mkdir(parents=True)
    mounted = f"{BUILD_HOME}/{BUILD_TRUST}"
    (home / ".config" / "pip" / "pip.conf").write_text(pip_config(f"{mounted}/ca-certificates.crt"))
    (home / ".mavenrc").write_text(maven_rc(f"{mounted}/cacerts"))
    return home


def bud_arguments(
    *, dockerfile: Path, context: Path, reference: str, volumes: Iterable[str]
) -> list[str]:
    """The `buildah bud` command line of a project image.

    Host network: a private one makes buildah set up a CNI bridge (cni-podman0) and firewall
    chains on the host, beside the node's own. The default (oci) isolation works here: the
    oom_score_adj pitfall of runc is containerd's CRI, not buildah's. --layers reuses unchanged
    steps (the apt and pyspark layers) when only the sources change.
    """
    return [
        "buildah",
        "bud",
        "--isolation=oci",
        "--network=host",
        "--pull=never",
        "--layers",
        f"--build-arg=BASE_IMAGE={versions.BASE_IMAGE}",
        *volumes,
        f"--file={dockerfile}",
        f"--tag={reference}",
        str(context),
    ]


class BuildLeftoverError(RuntimeError):
    """A built image contains what only the build was meant to see."""


def _check_no_build_home(reference: str, home: Path) -> None:
    """Fail if anything of the build's home (its trust, pip and Maven configs, caches) was
    committed under the image's /root."""
    log = _log("check")
    container = _buildah("from", "--pull=never", reference, log=log)
    try:
        root = Path(_buildah("mount", container, log=log)) / BUILD_HOME.lstrip("/")
        leftovers = sorted(p.name for p in home.iterdir() if (root / p.name).exists())
    finally:
        subprocess.run(["buildah", "rm", container], capture_output=True, check=False)
    if leftovers:
        # Not to be found again as a cached build of these inputs.
        subprocess.run(["buildah", "rmi", reference], capture_output=True, check=False)
        raise BuildLeftoverError(f"{reference} holds build-only files in {BUILD_HOME}: {leftovers}")


def _remove_other_tags(name: str, keep: str) -> None:
    """Untag older builds of this image, so the store does not grow with every source change."""
    listed = subprocess.run(
        [
            "buildah",
            "images",
            "--format={{.Name}}:{{.Tag}}",
            f"--filter=reference={PROJECT_REPOSITORY}/{name}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    for reference in listed.stdout.split():
        if reference != keep:
            subprocess.run(["buildah", "rmi", reference], capture_output=True, check=False)


def build_project_image(repo_root: Path, name: str, *, report: Reporter = _quiet) -> str:
    """Build images/<name>/Dockerfile (unless an image of the same content exists); its name."""
    base = local_image(build_base(report=report))
    assert base is not None  # just built or found
    inputs = image_inputs(repo_root, name)
    reference = project_reference(name, content_tag(inputs, base_image_id=base.image_id))
    if local_image(reference):
        return reference
    context = _images_dir() / "context" / name
    _stage_context(inputs, context)
    log = _log(name)
    log.unlink(missing_ok=True)
    with Spans(report, f"{name} image: ") as spans:
        home = _build_home()
        arguments = bud_arguments(
            dockerfile=context / "images" / name / "Dockerfile",
            context=context,
            reference=reference,
            volumes=[f"--volume={home}:{BUILD_HOME}"],
        )
        run_logged(arguments, log=log, on_line=stage_changes(spans, buildah_step))
        spans.start(f"check {reference} holds nothing of the build's home")
        _check_no_build_home(reference, home)
    shutil.rmtree(context, ignore_errors=True)
    shutil.rmtree(home, ignore_errors=True)
    _remove_other_tags(name, reference)
    return reference


def build_project_images(repo_root: Path, *, report: Reporter = _quiet) -> dict[str, str]:
    """Build the operator and runtime images from their Dockerfiles: {"operator": name, ...}.

    The base image is built first if missing. An image whose inputs are unchanged is not rebuilt.
    """
    return {name: build_project_image(repo_root, name, report=report) for name in PROJECT_IMAGES}


# --- Import into containerd ------------------------------------------------------------------


def _ctr(socket: Path | str, *args: str) -> list[str]:
    return ["ctr", "-a", str(socket), "-n", CONTAINERD_NAMESPACE, *args]


def containerd_labels(listing: str, reference: str) -> dict[str, str] | None:
    """The labels `ctr images ls` shows for this image, None if it is not listed."""
    for line in listing.splitlines()[1:]:
        columns = line.split()
        if columns and columns[0] == reference:
            labels = columns[-1]
            return {} if labels == "-" else dict(x.split("=", 1) for x in labels.split(","))
    return None


def stale_image_refs(listing: str, keep: Iterable[str]) -> list[str]:
    """The references of `ctr images ls` output that name none of the `keep` images: older
    builds, under their names and under the `sha256:<id>` references CRI adds for each."""
    rows = [line.split() for line in listing.splitlines()[1:] if line.strip()]
    kept = set(keep)
    kept_manifests = {row[2] for row in rows if row[0] in kept}
    return [row[0] for row in rows if row[2] not in kept_manifests]


def remove_stale_images(keep: Iterable[str], *, socket: Path | str) -> list[str]:
    """Remove every image of the node's containerd but the `keep` ones (containerd frees their
    content); the references removed. The image store outlives `down`, so each build of the
    project's images would otherwise stay on disk, a GB each."""
    listing = subprocess.run(
        _ctr(socket, "images", "ls"), capture_output=True, text=True, check=True
    ).stdout
    stale = stale_image_refs(listing, keep)
    if stale:
        run_logged(_ctr(socket, "images", "rm", *stale), log=_log("import"))
    return stale


def import_into_containerd(image: str, *, socket: Path | str, report: Reporter = _quiet) -> bool:
    """Import a buildah image into containerd's k8s.io namespace (what kubelet sees).

    Skipped, returning False, when containerd already holds this name from the same image id.
    """
    local = local_image(image)
    if local is None:
        raise CommandFailedError(f"no {image} in buildah's store")
    listing = subprocess.run(
        _ctr(socket, "images", "ls", f"name=={image}"),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    labels = containerd_labels(listing, image) or {}
    if labels.get(IMPORTED_ID_LABEL) == local.image_id:
        return False
    log = _log("import")
    archive = _images_dir() / "archives" / f"{local.image_id}.tar"
    archive.parent.mkdir(parents=True, exist_ok=True)
    archive.unlink(missing_ok=True)
    try:
        with report(f"import {image} into containerd"):
            run_logged(["buildah", "push", image, f"docker-archive:{archive}:{image}"], log=log)
            run_logged(_ctr(socket, "images", "import", str(archive)), log=log)
            run_logged(
                _ctr(socket, "images", "label", image, f"{IMPORTED_ID_LABEL}={local.image_id}"),
                log=log,
            )
    finally:
        archive.unlink(missing_ok=True)  # up to a GB; containerd keeps its own copy
    return True
