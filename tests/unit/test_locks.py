"""The lock files pin what pyproject.toml asks for, agree with each other, and check hashes.

`make test` installs requirements/dev.txt, each image its own lock (images/*/requirements.txt),
all with `--require-hashes`. `make lock` writes them; these tests fail when one is stale.

Test plan:
- every requirement of pyproject.toml (and of the extras each lock is for) is pinned there, at a
  version it allows (a stale lock after a pyproject change fails here);
- a package pinned in more than one lock has one version in all of them (the images run what
  the tests ran);
- every pin carries at least one sha256 hash.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
# Each lock, and the extras (of pyproject.toml) it is compiled for.
LOCKS = {
    "requirements/dev.txt": ("dev", "spark", "bench", "devstack"),
    "images/operator/requirements.txt": ("protoc",),
    "images/runtime/requirements.txt": ("spark",),
}
_PIN = re.compile(r"^([A-Za-z0-9._-]+)==([^\s\\]+)\s*\\?$")


def _pins(lock: str) -> dict[str, tuple[str, int]]:
    """Package -> (version, number of hashes) of a lock file."""
    pins: dict[str, tuple[str, int]] = {}
    current: str | None = None
    for line in (REPO / lock).read_text(encoding="utf-8").splitlines():
        found = _PIN.match(line)
        if found:
            current = canonicalize_name(found.group(1))
            pins[current] = (found.group(2), 0)
        elif current is not None and line.strip().startswith("--hash=sha256:"):
            version, hashes = pins[current]
            pins[current] = (version, hashes + 1)
    return pins


def _requirements(extras: tuple[str, ...]) -> list[Requirement]:
    declared = list(PROJECT["dependencies"])
    for extra in extras:
        declared += PROJECT["optional-dependencies"][extra]
    found = [Requirement(text) for text in declared]
    return [r for r in found if canonicalize_name(r.name) != "rillet"]


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_a_lock_pins_every_requirement_at_a_version_it_allows(lock: str) -> None:
    pins = _pins(lock)
    for requirement in _requirements(LOCKS[lock]):
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{lock} does not pin {name}: run `make lock`"
        version, _ = pins[name]
        assert requirement.specifier.contains(version, prereleases=True), (
            f"{lock} pins {name}=={version}, which {requirement} refuses: run `make lock`"
        )


def test_the_locks_agree_and_every_pin_is_hashed() -> None:
    versions: dict[str, dict[str, str]] = {}
    for lock in LOCKS:
        for name, (version, hashes) in _pins(lock).items():
            assert hashes > 0, f"{lock}: {name} has no hash"
            versions.setdefault(name, {})[lock] = version
    disagreeing = {name: found for name, found in versions.items() if len(set(found.values())) > 1}
    assert disagreeing == {}
