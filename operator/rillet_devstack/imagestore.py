"""Buildah's image store as the stack's image builds use it: where their logs and scratch files
go, the key a cached image is recognised by, looking an image up, and committing a `FROM scratch`
image of a few files (the pause and base images).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import subprocess
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from rillet_devstack import paths
from rillet_devstack.commands import CommandFailedError

# Labels on the images this module commits, to recognise a cached one.
KEY_LABEL = "io.rillet.build-key"


def images_dir() -> Path:
    return paths.cache_dir() / "images"


def build_log(name: str) -> Path:
    return images_dir() / "logs" / f"{name}.log"


def digest(*parts: bytes | str) -> str:
    """sha256 over length-prefixed parts, so that ("ab", "c") and ("a", "bc") differ."""
    hashed = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        hashed.update(f"{len(data)}:".encode())
        hashed.update(data)
    return hashed.hexdigest()


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


def cached(reference: str, key: str) -> LocalImage | None:
    image = local_image(reference)
    return image if image and image.labels.get(KEY_LABEL) == key else None


def buildah(*args: str | Path, log: Path) -> str:
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
    container = buildah("from", "--pull=never", "scratch", log=log)
    try:
        yield container
    finally:
        subprocess.run(["buildah", "rm", container], capture_output=True, check=False)


def commit_scratch(
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
            buildah(verb, container, source, destination, log=log)
        buildah("config", *config, "--label", f"{KEY_LABEL}={key}", container, log=log)
        return buildah("commit", "--quiet", container, reference, log=log)
