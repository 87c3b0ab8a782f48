"""How a cold `rillet dev up` builds: the node's images in a thread beside the artefacts, each
step shown as it runs and when it ends, several at once, from any thread.

The builds themselves are replaced by functions that record what ran (a real build takes
minutes and the network); what is tested is the order, the stopping and the lines shown.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from rillet import cli
from rillet.devstack import images, provisioning, stack, toolchain

WAIT = 10.0  # seconds a step waits for another thread before the test fails


def _artefact(name: str, build: Callable[[], None]) -> provisioning.Artefact:
    return provisioning.Artefact(name, "1", (), lambda scratch, target, progress: build())


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """The image builds that ran, in order; every artefact counts as missing."""
    ran: list[str] = []
    monkeypatch.setenv("RILLET_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(toolchain, "require", lambda tools: None)

    def image(name: str) -> Callable[..., str]:
        def build(*args: Any, **kwargs: Any) -> str:
            ran.append(name)
            return f"localhost/{name}:1"

        return build

    monkeypatch.setattr(images, "build_pause", image("pause"))
    monkeypatch.setattr(images, "build_base", image("base"))
    monkeypatch.setattr(images, "build_project_image", lambda root, name, **kw: image(name)())
    return ran


def test_the_images_build_while_the_artefacts_do(
    builds: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    last_image = threading.Event()

    def build_project_image(root: Path, name: str, **kwargs: Any) -> str:
        builds.append(name)
        if name == images.PROJECT_IMAGES[-1]:
            last_image.set()
        return f"localhost/{name}:1"

    monkeypatch.setattr(images, "build_project_image", build_project_image)

    def wait_for_the_images() -> None:
        # Ends only once every image is built: the two cannot have run one after the other.
        assert last_image.wait(WAIT)

    built = stack._provision_stack(
        [_artefact("slow", wait_for_the_images)], True, report=stack.silent
    )
    assert builds == ["pause", "base", *images.PROJECT_IMAGES]
    assert built == {name: f"localhost/{name}:1" for name in builds}


def test_a_failed_artefact_build_starts_no_further_image(
    builds: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    failed = threading.Event()
    stops: list[threading.Event] = []
    build_images = stack._build_images

    def recording_stop(*, report: stack.Reporter, stop: threading.Event) -> dict[str, str]:
        stops.append(stop)
        return build_images(report=report, stop=stop)

    monkeypatch.setattr(stack, "_build_images", recording_stop)

    def pause_until_the_failure(*args: Any, **kwargs: Any) -> str:
        builds.append("pause")
        assert failed.wait(WAIT)
        stops[0].wait(WAIT)  # `up` gives up on the images: else the next builds would run
        return "localhost/pause:1"

    monkeypatch.setattr(images, "build_pause", pause_until_the_failure)

    def fail() -> None:
        failed.set()
        raise RuntimeError("go: module lookup disabled")

    with pytest.raises(RuntimeError, match="module lookup disabled"):
        stack._provision_stack([_artefact("etcd", fail)], True, report=stack.silent)
    assert builds == ["pause"]


def test_without_a_node_no_image_is_built(builds: list[str]) -> None:
    built = stack._provision_stack([_artefact("etcd", lambda: None)], False, report=stack.silent)
    assert (built, builds) == ({}, [])


def test_steps_from_several_threads_each_end_with_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shown = io.StringIO()
    monkeypatch.setattr(cli, "console", Console(file=shown, width=100, color_system=None))
    steps = cli._TimedSteps()
    all_started = threading.Barrier(3, timeout=WAIT)

    def step(name: str, fails: bool) -> None:
        with steps(name) as update:
            all_started.wait()  # three steps open at once
            update("42 packages compiled [1/4]")
            if fails:
                raise RuntimeError(name)

    with ThreadPoolExecutor(3) as pool:
        ran = [
            pool.submit(step, "build etcd", False),
            pool.submit(step, "runtime image: [2/4] step 6/8", False),
            pool.submit(step, "build helm", True),
        ]
    assert [type(f.exception()) for f in ran] == [type(None), type(None), RuntimeError]
    lines = sorted(line.rsplit(" ", 1)[0] for line in shown.getvalue().splitlines())
    assert lines == ["✓ build etcd", "✓ runtime image: [2/4] step 6/8", "✗ build helm"]
