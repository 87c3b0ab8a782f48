"""A user's image on the local stack: `rillet dev image build -t NAME DIR`.

What `kind load docker-image` is to a kind user: the user's Dockerfile (docs/python-pipelines.md)
is built with the stack's buildah, as the project's images are (the host's trust mounted over
/root for the RUN steps, nothing pulled), and imported into the containerd of every node, node 1
and the running extra nodes, under the name a pod's `image:` resolves to. Its Dockerfile names
the runtime image through the build argument RUNTIME_IMAGE, which the command sets to the
stack's current runtime image: a user's image always sits on the runtime the stack runs.

A pod names an image as containerd's CRI resolves a short name (`my-app:dev` is
`docker.io/library/my-app:dev`), so the image is tagged in buildah and imported under that
full name, and the App's `spec.image` may say `my-app:dev`.

The pure parts (the name, the command line) are apart from the effects (`build`).
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from rillet_devstack import images, imagestore, importing, nodegrowing, reporting, stack
from rillet_devstack.commands import CommandFailedError, run_logged

# The build argument a user's Dockerfile takes its base from (`ARG RUNTIME_IMAGE` before
# `FROM ${RUNTIME_IMAGE}`): the command sets it to the stack's runtime image.
RUNTIME_IMAGE_ARG = "RUNTIME_IMAGE"
# Where a build's RUN steps find the host's trust (a folder of its own: see images.build_home).
BUILD_HOME_NAME = "user-build-home"

# The grammar of distribution/reference (what containerd and Docker parse), reduced to what a
# name given to `-t` may hold: [domain/]path[:tag], no digest (a build makes a tag).
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9-]+)*)(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_REFERENCE = re.compile(
    rf"^(?:(?P<domain>{_DOMAIN})/)?(?P<path>{_COMPONENT}(?:/{_COMPONENT})*)(?::(?P<tag>{_TAG}))?$"
)
DEFAULT_DOMAIN = "docker.io"


class InvalidNameError(ValueError):
    """The name given to `-t` is no image reference a pod could name."""


def normalized_reference(name: str) -> str:
    """The full name containerd's CRI resolves `name` to, as Docker's normalization does:
    `my-app:dev` -> `docker.io/library/my-app:dev`; no tag is `:latest`."""
    match = _REFERENCE.match(name)
    if match is None or len(name) > 255:
        raise InvalidNameError(
            f"{name!r} is not an image name: lowercase path components separated by '/', "
            "an optional registry first and an optional ':tag' (no digest)"
        )
    domain, path, tag = match.group("domain"), match.group("path"), match.group("tag")
    # As in Docker: a first component without '.' or ':' that is not localhost is a path, not
    # a registry (`team/app` is docker.io/team/app).
    if domain is not None and not ("." in domain or ":" in domain or domain == "localhost"):
        domain, path = None, f"{domain}/{path}"
    if domain is None:
        domain = DEFAULT_DOMAIN
        if "/" not in path:
            path = f"library/{path}"
    return f"{domain}/{path}:{tag or 'latest'}"


@dataclass(frozen=True)
class BuildRequest:
    """A user's build: its context folder, Dockerfile and name (as given and in full)."""

    context: Path
    dockerfile: Path
    name: str
    reference: str

    @classmethod
    def of(cls, context: Path, *, name: str, dockerfile: Path | None = None) -> BuildRequest:
        """The request for `context` (its Dockerfile unless `dockerfile`); InvalidNameError for
        a bad name, FileNotFoundError for a missing folder or Dockerfile."""
        reference = normalized_reference(name)
        file = dockerfile if dockerfile is not None else context / "Dockerfile"
        if not context.is_dir():
            raise FileNotFoundError(f"no folder {context}")
        if not file.is_file():
            raise FileNotFoundError(f"no Dockerfile at {file}")
        return cls(
            context=context.resolve(),
            dockerfile=file.resolve(),
            name=name,
            reference=reference,
        )


def build_arguments(request: BuildRequest, *, runtime_image: str, home: Path) -> list[str]:
    """The `buildah bud` command line of a user's image: the project images' (host network,
    nothing pulled, the build home mounted over /root), with RUNTIME_IMAGE the stack's."""
    return images.bud_arguments(
        dockerfile=request.dockerfile,
        context=request.context,
        reference=request.reference,
        volumes=[f"--volume={home}:{images.BUILD_HOME}"],
        build_args={RUNTIME_IMAGE_ARG: runtime_image},
    )


class NoNodeError(RuntimeError):
    """The stack runs without a node (`rillet dev up --no-node`): no image would run."""


def build(
    state: stack.StackState,
    request: BuildRequest,
    *,
    report: reporting.Reporter = reporting.silent,
) -> list[str]:
    """Build the user's image on the stack's runtime image and import it into every running
    node; the nodes that hold it."""
    if state.node is None or "runtime" not in state.node.images:
        raise NoNodeError("the stack runs without a node: start it with `rillet dev up`")
    log = imagestore.build_log("user-image")
    log.unlink(missing_ok=True)
    home = images.build_home(BUILD_HOME_NAME)
    try:
        with reporting.Spans(report, f"{request.name}: ") as spans:
            arguments = build_arguments(
                request, runtime_image=state.node.images["runtime"], home=home
            )
            on_line = reporting.stage_changes(spans, images.buildah_step)
            run_logged(arguments, log=log, on_line=on_line)
            spans.start(f"check {request.reference} holds nothing of the build's home")
            images.check_no_build_home(request.reference, home)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    socket = state.node.containerd_socket
    if imagestore.local_image(request.reference) is None:
        raise CommandFailedError(f"buildah made no {request.reference}; see {log}")
    importing.import_into_containerd(request.reference, socket=socket, report=report)
    # The extra nodes get what node 1 holds, this image among it.
    nodegrowing.sync_images(state, report=report)
    return [state.node.name, *(n.name for n in state.extra_nodes if n.running)]
