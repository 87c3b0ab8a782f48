"""`rillet dev image build`: the pure parts of building a user's image on the local stack.

Test plan:
- a name given to `-t` becomes the full name containerd's CRI resolves a pod's `image:` to, by
  Docker's rules (checked against the names Docker documents: `ubuntu` is
  docker.io/library/ubuntu:latest, `team/app` docker.io/team/app, a registry with a '.' or a
  port, or localhost, stays); names no pod could give are refused, saying what a name is;
- a request takes the folder's Dockerfile unless one is named, and refuses a missing folder,
  Dockerfile or bad name before anything is built;
- the build's command line is the project images': nothing pulled, the host network, the build
  home over /root; its one build argument is RUNTIME_IMAGE, the stack's runtime image (never
  the project images' BASE_IMAGE, which a user's Dockerfile does not take); the context and
  the Dockerfile are the user's, the tag is the full name.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rillet_devstack import images, userimages


@pytest.mark.parametrize(
    ("given", "resolved"),
    [
        ("my-app:dev", "docker.io/library/my-app:dev"),
        ("ubuntu", "docker.io/library/ubuntu:latest"),
        ("team/clicks:v2", "docker.io/team/clicks:v2"),
        ("docker.io/library/my-app:dev", "docker.io/library/my-app:dev"),
        ("registry.example.com/team/app:1.0", "registry.example.com/team/app:1.0"),
        ("localhost:5000/app:1", "localhost:5000/app:1"),
        ("localhost/app:1", "localhost/app:1"),
        ("my_app.v2/sub-path:Tag_1.0-rc", "docker.io/my_app.v2/sub-path:Tag_1.0-rc"),
    ],
)
def test_a_name_is_what_a_pods_image_resolves_to(given: str, resolved: str) -> None:
    assert userimages.normalized_reference(given) == resolved


@pytest.mark.parametrize(
    "given",
    ["My-App:dev", "my-app:", "my-app@sha256:" + "a" * 64, "-app:1", "app:-x", "a//b:1", ""],
)
def test_a_name_no_pod_could_give_is_refused_saying_what_a_name_is(given: str) -> None:
    with pytest.raises(userimages.InvalidNameError, match="is not an image name: lowercase"):
        userimages.normalized_reference(given)


def test_a_request_takes_the_folders_dockerfile_unless_one_is_named(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    (tmp_path / "other.Dockerfile").write_text("FROM scratch\n")

    default = userimages.BuildRequest.of(tmp_path, name="my-app:dev")
    named = userimages.BuildRequest.of(
        tmp_path, name="my-app:dev", dockerfile=tmp_path / "other.Dockerfile"
    )

    assert (default.context, default.dockerfile) == (tmp_path, tmp_path / "Dockerfile")
    assert named.dockerfile == tmp_path / "other.Dockerfile"
    assert (default.name, default.reference) == ("my-app:dev", "docker.io/library/my-app:dev")


def test_a_request_refuses_what_cannot_be_built(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=f"no Dockerfile at {tmp_path}/Dockerfile"):
        userimages.BuildRequest.of(tmp_path, name="my-app:dev")
    with pytest.raises(FileNotFoundError, match="no folder"):
        userimages.BuildRequest.of(tmp_path / "missing", name="my-app:dev")
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    with pytest.raises(userimages.InvalidNameError):
        userimages.BuildRequest.of(tmp_path, name="My-App")


def test_the_build_sets_runtime_image_to_the_stacks_and_pulls_nothing() -> None:
    request = userimages.BuildRequest(
        context=Path("/src/clicks"),
        dockerfile=Path("/src/clicks/Dockerfile"),
        name="clicks:v1",
        reference="docker.io/library/clicks:v1",
    )

    arguments = userimages.build_arguments(
        request, runtime_image="localhost/rillet/runtime:0123abcd", home=Path("/cache/home")
    )

    assert arguments[:2] == ["buildah", "bud"]
    assert "--pull=never" in arguments
    assert "--network=host" in arguments
    assert [a for a in arguments if a.startswith("--build-arg")] == [
        "--build-arg=RUNTIME_IMAGE=localhost/rillet/runtime:0123abcd"
    ]
    assert f"--volume=/cache/home:{images.BUILD_HOME}" in arguments
    assert "--file=/src/clicks/Dockerfile" in arguments
    assert "--tag=docker.io/library/clicks:v1" in arguments
    assert arguments[-1] == "/src/clicks"
