"""The project's images carry the product alone: the development stack is none of their inputs.

Test plan:
- an edit under operator/rillet_devstack/ (a changed module, a new one) leaves both project
  image tags as they were, while an edit of the product (operator/rillet/) changes both: the
  tags are computed over a copy of the repository files the images are made from.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from rillet_devstack import images

REPO = Path(__file__).resolve().parents[2]


def _copy_of_the_repository(target: Path) -> Path:
    """The files the image inputs are gathered from, with the development stack beside them."""
    skipped = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in ("pyproject.toml", "README.md"):
        shutil.copyfile(REPO / name, target / name)
    for folder in ("images", "operator/rillet", "operator/rillet_devstack"):
        shutil.copytree(REPO / folder, target / folder, ignore=skipped)
    return target


def _tags(repo_root: Path) -> dict[str, str]:
    return {
        name: images.content_tag(images.image_inputs(repo_root, name), base_image_id="base1")
        for name in images.PROJECT_IMAGES
    }


def test_a_devstack_edit_leaves_both_image_tags_and_a_product_edit_changes_them(
    tmp_path: Path,
) -> None:
    repo = _copy_of_the_repository(tmp_path)
    before = _tags(repo)
    assert before == _tags(REPO)
    devstack = repo / "operator" / "rillet_devstack"
    with (devstack / "stack.py").open("a") as module:
        module.write("\n# an edit of the development stack\n")
    (devstack / "new_module.py").write_text('"""A new module of the development stack."""\n')
    assert _tags(repo) == before
    for inputs in (images.image_inputs(repo, name) for name in images.PROJECT_IMAGES):
        assert not [path for path in inputs if "rillet_devstack" in path]
    with (repo / "operator" / "rillet" / "cli" / "__init__.py").open("a") as module:
        module.write("\n# an edit of the product\n")
    after = _tags(repo)
    assert all(after[name] != before[name] for name in images.PROJECT_IMAGES)
