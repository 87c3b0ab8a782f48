"""The images the stack builds: the node's pause image and the project's own images.

No image registry is reachable here, so every image the node runs is built on this machine:

- the pause (sandbox) image: a static C program (images/pause/pause.c) in a `FROM scratch` image;
- on the Debian base (debootstrapping), the project's images/operator and images/runtime
  Dockerfiles, built as written by `buildah bud` and tagged with a hash of everything that goes
  into them (the product's sources, not this package's), so an unchanged image is not rebuilt.

Package downloads inside a build go through a TLS-intercepting proxy whose CA only the host
trusts. Each RUN step therefore gets a home directory for root, mounted over /root, holding copies
of the host's CA bundle and Java cacerts and the pip and Maven user configurations that point at
them: neither the Dockerfiles nor the images know about it, and nothing of it is committed
(checked after each build).

Each `STEP` buildah announces opens a span of the caller's reporter (reporting.Reporter).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import yaml

from rillet_devstack import debootstrapping, imagestore, reporting, versions
from rillet_devstack.commands import run_logged

REPOSITORY = Path(__file__).resolve().parents[2]
PAUSE_SOURCE = REPOSITORY / "images" / "pause" / "pause.c"
PROJECT_IMAGES = ("operator", "runtime")
PROJECT_REPOSITORY = "localhost/rillet"

# Root's home in a build's RUN steps (a volume), and the folder in it with the host's CAs.
BUILD_HOME = "/root"
BUILD_TRUST = ".rillet-build-trust"
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
HOST_JAVA_CACERTS = Path("/etc/ssl/certs/java/cacerts")


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


# --- The pause image -------------------------------------------------------------------------


# 65535: the nobody-like user the upstream pause image runs as.
PAUSE_CONFIG = ("--entrypoint", '["/pause"]', "--user", "65535:65535")


def build_pause(
    *, source: Path = PAUSE_SOURCE, report: reporting.Reporter = reporting.silent
) -> str:
    """The node's sandbox image (versions.PAUSE_IMAGE) from a static C program; its name.

    Cached by the program's source: an unchanged one is not compiled again.
    """
    reference = versions.PAUSE_IMAGE
    key = imagestore.digest("pause", source.read_bytes(), *PAUSE_CONFIG)
    if imagestore.cached(reference, key):
        return reference
    with report(f"pause image {reference}: gcc -static, commit"):
        scratch = imagestore.images_dir() / "build" / "pause"
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True)
        binary = scratch / "pause"
        run_logged(
            ["gcc", "-Os", "-static", "-s", "-o", binary, source], log=imagestore.build_log("pause")
        )
        imagestore.commit_scratch(
            reference=reference,
            key=key,
            files=[("copy", binary, "/pause")],
            config=PAUSE_CONFIG,
            log=imagestore.build_log("pause"),
        )
        shutil.rmtree(scratch, ignore_errors=True)
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
    return imagestore.digest("project-image", base_image_id, *parts)[:TAG_LENGTH]


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


def build_home(name: str = "build-home") -> Path:
    """A home directory for root in the build's RUN steps, holding the host's trust (`name`:
    its folder, one per kind of build, so a user's build never empties a project build's).

    It is mounted over /root, which the base already has: a volume on a path the image lacks
    (/etc/pip.conf) would leave an empty stub of it in the layer. pip and mvn read their user
    configuration from there; whatever a step writes to $HOME (Maven's ~/.m2) stays out of the
    image as well.
    """
    home = imagestore.images_dir() / name
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
    *,
    dockerfile: Path,
    context: Path,
    reference: str,
    volumes: Iterable[str],
    build_args: Mapping[str, str] | None = None,
) -> list[str]:
    """The `buildah bud` command line of a project image (`build_args`: the Dockerfile's ARGs,
    by default the base image's).

    Host network: a private one makes buildah set up a CNI bridge (cni-podman0) and firewall
    chains on the host, beside the node's own. The default (oci) isolation works here: the
    oom_score_adj pitfall of runc is containerd's CRI, not buildah's. --layers reuses unchanged
    steps (the apt and pyspark layers) when only the sources change.
    """
    arguments = {"BASE_IMAGE": versions.BASE_IMAGE} if build_args is None else build_args
    return [
        "buildah",
        "bud",
        "--isolation=oci",
        "--network=host",
        "--pull=never",
        "--layers",
        *(f"--build-arg={name}={value}" for name, value in arguments.items()),
        *volumes,
        f"--file={dockerfile}",
        f"--tag={reference}",
        str(context),
    ]


class BuildLeftoverError(RuntimeError):
    """A built image contains what only the build was meant to see."""


def check_no_build_home(reference: str, home: Path) -> None:
    """Fail if anything of the build's home (its trust, pip and Maven configs, caches) was
    committed under the image's /root."""
    log = imagestore.build_log("check")
    container = imagestore.buildah("from", "--pull=never", reference, log=log)
    try:
        root = Path(imagestore.buildah("mount", container, log=log)) / BUILD_HOME.lstrip("/")
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


def build_project_image(
    repo_root: Path, name: str, *, report: reporting.Reporter = reporting.silent
) -> str:
    """Build images/<name>/Dockerfile (unless an image of the same content exists); its name."""
    base = imagestore.local_image(debootstrapping.build_base(report=report))
    assert base is not None  # just built or found
    inputs = image_inputs(repo_root, name)
    reference = project_reference(name, content_tag(inputs, base_image_id=base.image_id))
    if imagestore.local_image(reference):
        return reference
    context = imagestore.images_dir() / "context" / name
    _stage_context(inputs, context)
    log = imagestore.build_log(name)
    log.unlink(missing_ok=True)
    with reporting.Spans(report, f"{name} image: ") as spans:
        home = build_home()
        arguments = bud_arguments(
            dockerfile=context / "images" / name / "Dockerfile",
            context=context,
            reference=reference,
            volumes=[f"--volume={home}:{BUILD_HOME}"],
        )
        run_logged(arguments, log=log, on_line=reporting.stage_changes(spans, buildah_step))
        spans.start(f"check {reference} holds nothing of the build's home")
        check_no_build_home(reference, home)
    shutil.rmtree(context, ignore_errors=True)
    shutil.rmtree(home, ignore_errors=True)
    _remove_other_tags(name, reference)
    return reference


def build_project_images(
    repo_root: Path, *, report: reporting.Reporter = reporting.silent
) -> dict[str, str]:
    """Build the operator and runtime images from their Dockerfiles: {"operator": name, ...}.

    The base image is built first if missing. An image whose inputs are unchanged is not rebuilt.
    """
    return {name: build_project_image(repo_root, name, report=report) for name in PROJECT_IMAGES}


# --- The names users' manifests give them ----------------------------------------------------

CHART = REPOSITORY / "charts" / "rillet" / "Chart.yaml"
# The repositories the chart (values.yaml `image.repository`) and examples/*.yaml name, as
# containerd's CRI resolves a short name (`rillet/operator` is docker.io/rillet/operator).
CHART_REPOSITORIES = {
    "operator": "docker.io/rillet/operator",
    "runtime": "docker.io/rillet/spark-runtime",
}


def chart_references(chart_yaml: str) -> dict[str, str]:
    """The project's images as the chart and the examples name them, tagged with the chart's
    appVersion (what `kind load` gives a kind user): {"operator": "docker.io/rillet/operator:
    0.1.0", ...}."""
    app_version = yaml.safe_load(chart_yaml)["appVersion"]
    return {name: f"{repository}:{app_version}" for name, repository in CHART_REPOSITORIES.items()}
