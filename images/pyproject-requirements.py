"""Print the requirements pyproject.toml declares, one per line, for `pip install -r`.

Used by the Dockerfiles to install Rillet's dependencies in a layer of their own, keyed by
pyproject.toml alone, so that a change to the sources does not download them again.
Usage: python3 pyproject-requirements.py <pyproject.toml> [extra ...]
"""

import sys
import tomllib


def main(pyproject: str, *extras: str) -> None:
    with open(pyproject, "rb") as handle:
        project = tomllib.load(handle)["project"]
    requirements = list(project["dependencies"])
    for extra in extras:
        requirements += project["optional-dependencies"][extra]
    print("\n".join(requirements))


if __name__ == "__main__":
    main(*sys.argv[1:])
