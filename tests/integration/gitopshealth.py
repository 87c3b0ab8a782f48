"""How Flux and Argo CD see objects, computed by their own code: tests/gitopshealth (Go).

That program runs kstatus (`status.Compute`, upstream and Flux's fork, which must agree) and
charts/rillet/argocd/health.lua in gopher-lua as Argo CD runs a health check (see its main.go).
It is built once into the stack's cache, through the same `provisioning` mechanism as the
stack's Go tools: the cache entry is keyed by a hash of the program's sources (main.go, go.mod,
go.sum), so an edit builds a new entry next to the old one, and a warm run costs nothing.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rillet_devstack import gobuilding, provisioning, reporting, toolchain
from rillet_devstack.commands import run_logged

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "tests" / "gitopshealth"
HEALTH_LUA = REPO / "charts" / "rillet" / "argocd" / "health.lua"
BINARY = "gitopshealth"


@dataclass(frozen=True)
class Health:
    """One object as the two tools see it."""

    kstatus: str  # Current, InProgress, Failed, Terminating (Flux's health check waits for Current)
    kstatus_message: str
    argocd: str  # Healthy, Progressing, Degraded, Suspended, Missing or Unknown
    argocd_message: str


def _sources() -> list[Path]:
    return sorted(
        path
        for path in SOURCE.iterdir()
        if path.suffix == ".go" or path.name in ("go.mod", "go.sum")
    )


def source_hash() -> str:
    """A digest of the program's sources: its cache key."""
    digest = hashlib.sha256()
    for path in _sources():
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _build(scratch: Path, target: Path, progress: reporting.Progress) -> None:
    """Compile a copy of the sources (go.sum must be complete: -mod=readonly) into `target`."""
    module = scratch / "src"
    module.mkdir()
    for path in _sources():
        shutil.copy2(path, module / path.name)
    env = {**gobuilding.GO_ENV, "GOFLAGS": "-mod=readonly"}
    run_logged(
        ["go", "build", "-trimpath", "-o", target / BINARY, "."],
        cwd=module,
        log=target / "build.log",
        env=env,
    )


def artefact() -> provisioning.Artefact:
    """The built program, as a cache entry (`gitopshealth-v<source hash>`)."""
    return provisioning.Artefact("gitopshealth", source_hash(), ("go",), _build)


def binary() -> Path:
    """The program, built into the cache first if this version of it is not there."""
    wanted = artefact()
    if not wanted.present:
        toolchain.require(wanted.tools)
    return provisioning.provision(wanted) / BINARY


def assess(objects: Sequence[Mapping[str, Any]]) -> list[Health]:
    """The health of each object (as read from the apiserver), in order."""
    result = subprocess.run(
        [str(binary()), "-health-lua", str(HEALTH_LUA)],
        input=json.dumps(list(objects)),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if result.returncode != 0:
        raise RuntimeError(f"gitopshealth exited {result.returncode}: {result.stderr.strip()}")
    found = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert len(found) == len(objects), f"{len(objects)} objects, {len(found)} answers"
    return [
        Health(
            kstatus=item["kstatus"],
            kstatus_message=item["kstatusMessage"],
            argocd=item["argocd"],
            argocd_message=item["argocdMessage"],
        )
        for item in found
    ]


def argocd_health(obj: Mapping[str, Any]) -> tuple[str, str]:
    """Argo CD's health status and message of one object."""
    health = assess([obj])[0]
    return health.argocd, health.argocd_message
