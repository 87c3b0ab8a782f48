"""Importing the built images into the node's containerd (its k8s.io namespace, what kubelet
sees), and removing the older builds from it: the image store outlives `rillet dev down`.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from pathlib import Path

from rillet_devstack import imagestore, reporting
from rillet_devstack.commands import CommandFailedError, run_logged

# The label an imported image gets in containerd: the buildah image id it was imported from.
IMPORTED_ID_LABEL = "io.rillet.image-id"
CONTAINERD_NAMESPACE = "k8s.io"


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
        run_logged(_ctr(socket, "images", "rm", *stale), log=imagestore.build_log("import"))
    return stale


def import_into_containerd(
    image: str, *, socket: Path | str, report: reporting.Reporter = reporting.silent
) -> bool:
    """Import a buildah image into containerd's k8s.io namespace (what kubelet sees).

    Skipped, returning False, when containerd already holds this name from the same image id.
    """
    local = imagestore.local_image(image)
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
    log = imagestore.build_log("import")
    archive = imagestore.images_dir() / "archives" / f"{local.image_id}.tar"
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


def tag(source: str, target: str, *, socket: Path | str) -> None:
    """Give an image of the node's containerd another name (moved from any image it named)."""
    run_logged(
        _ctr(socket, "images", "tag", "--force", source, target), log=imagestore.build_log("import")
    )


def named_images(listing: str) -> dict[str, str]:
    """{reference: manifest digest} of `ctr images ls` output, without CRI's `sha256:` names."""
    rows = [line.split() for line in listing.splitlines()[1:] if line.strip()]
    return {row[0]: row[2] for row in rows if not row[0].startswith("sha256:")}


def missing_images(wanted: dict[str, str], present: dict[str, str]) -> list[str]:
    """The references of `wanted` that `present` lacks or holds as another image."""
    return sorted(ref for ref, digest in wanted.items() if present.get(ref) != digest)


def _named_images(socket: Path | str) -> dict[str, str]:
    listing = subprocess.run(
        _ctr(socket, "images", "ls"), capture_output=True, text=True, check=True
    ).stdout
    return named_images(listing)


def copy_images(
    *,
    source: Path | str,
    targets: list[Path],
    report: reporting.Reporter = reporting.silent,
) -> None:
    """Make every target containerd hold the images the source holds, under the same names (and
    nothing else): one archive exported from the source, imported into the targets at once."""
    wanted = _named_images(source)
    needs = {target: missing_images(wanted, _named_images(target)) for target in targets}
    references = sorted({ref for missing in needs.values() for ref in missing})
    if references:
        log = imagestore.build_log("import")
        archive = imagestore.images_dir() / "archives" / "nodes.tar"
        archive.parent.mkdir(parents=True, exist_ok=True)
        with report(f"copy {len(references)} images to {sum(map(bool, needs.values()))} nodes"):
            try:
                export = ["images", "export", "--platform", "linux/amd64", str(archive)]
                run_logged(_ctr(source, *export, *references), log=log)
                with log.open("ab") as out:
                    imports = [
                        subprocess.Popen(
                            _ctr(target, "images", "import", str(archive)),
                            stdout=out,
                            stderr=subprocess.STDOUT,
                        )
                        for target, missing in needs.items()
                        if missing
                    ]
                    failed = [p.args for p in imports if p.wait() != 0]
                if failed:
                    raise CommandFailedError(f"{failed} failed; see {log}")
            finally:
                archive.unlink(missing_ok=True)  # GBs; each containerd keeps its own copy
    for target in targets:
        remove_stale_images(wanted, socket=target)
