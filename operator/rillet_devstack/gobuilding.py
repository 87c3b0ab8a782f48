"""Compiling the stack's Go programs from their modules: Kubernetes (control plane and node
components), etcd, helm, CoreDNS, the local-path provisioner and SeaweedFS, at the pinned
versions.

The machine's Go is used as it is (no toolchain download). Builds run with `-v` and report how
many modules they downloaded and packages they compiled so far (GoProgress), because a cold
Kubernetes build takes many minutes and would otherwise look hung.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rillet_devstack import reporting, versions
from rillet_devstack.commands import run_logged

# Never let the go command download another toolchain: the machine's Go must do.
GO_ENV = {"GOTOOLCHAIN": "local", "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod"}


def kubernetes_version_ldflags(version: str) -> str:
    """Version stamps for component-base and client-go, so /version reports the pinned release."""
    major, minor, _ = version.split(".")
    stamps = {
        "gitVersion": f"v{version}",
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        "gitCommit": "0000000000000000000000000000000000000000",
        "buildDate": "1970-01-01T00:00:00Z",
    }
    packages = ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
    return " ".join(f"-X {pkg}.{key}={value}" for pkg in packages for key, value in stamps.items())


def staging_modules(kubernetes_go_mod: str) -> list[str]:
    """The k8s.io staging modules that k8s.io/kubernetes requires at v0.0.0 (replaced locally)."""
    return sorted(set(re.findall(r"^\s+(k8s\.io/[\w.-]+) v0\.0\.0$", kubernetes_go_mod, re.M)))


_DOWNLOADING = re.compile(r"go: downloading (\S+) (\S+)")
# What `go build -v` prints for a package it compiles: the bare import path, nothing else.
_IMPORT_PATH = re.compile(r"[\w.~+-]+(?:/[\w.~+-]+)*")


@dataclass
class GoProgress:
    """How far a sequence of go commands has got, counted from their output.

    The module commands print `go: downloading <module> <version>` for each module they fetch;
    `go build -v` / `go install -v` print each package's import path as they compile it (never
    the ones found in the build cache, so a warm rebuild counts few). Other lines are ignored.
    """

    downloaded: int = 0
    compiled: int = 0
    latest: str = ""

    def feed(self, line: str) -> bool:
        """Account for one line of output; True if it changed the summary."""
        if match := _DOWNLOADING.fullmatch(line):
            self.downloaded += 1
            self.latest = f"{match[1]} {match[2]}"
        elif _IMPORT_PATH.fullmatch(line):
            self.compiled += 1
            self.latest = line
        else:
            return False
        return True

    def summary(self) -> str:
        """One line such as `12 modules downloaded, 340 packages compiled (k8s.io/api/core/v1)`."""
        counts = []
        if self.downloaded:
            counts.append(f"{self.downloaded} modules downloaded")
        if self.compiled:
            counts.append(f"{self.compiled} packages compiled")
        return ", ".join(counts) + (f" ({self.latest})" if self.latest else "")


@dataclass
class _GoCommands:
    """Go commands run in one directory and logged to one file, their progress counted together."""

    cwd: Path
    log: Path
    progress: reporting.Progress
    env: dict[str, str] = field(default_factory=lambda: dict(GO_ENV))
    tracker: GoProgress = field(default_factory=GoProgress)

    def run(self, *args: str | Path) -> None:
        def on_line(line: str) -> None:
            if self.tracker.feed(line):
                self.progress(self.tracker.summary())

        run_logged(["go", *args], cwd=self.cwd, log=self.log, env=self.env, on_line=on_line)


def _go_wrapper_module(scratch: Path, log: Path) -> Path:
    module = scratch / "module"
    module.mkdir()
    run_logged(
        ["go", "mod", "init", "rillet.local/devstack-build"], cwd=module, log=log, env=GO_ENV
    )
    return module


def _build_kubernetes_commands(
    scratch: Path, target: Path, progress: reporting.Progress, commands: Sequence[str]
) -> None:
    """Build `k8s.io/kubernetes/cmd/<command>` for each command, at the pinned release.

    k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with local paths,
    which a dependent module cannot use: a wrapper module replaces each with its published v0.N.P.
    The binaries are stamped with the release (`kubernetes_version_ldflags`) and built without
    cgo, as static binaries (kubelet included: nothing it needs here takes cgo).
    """
    version = versions.KUBERNETES
    log = target / "build.log"
    module = _go_wrapper_module(scratch, log)
    # Only k8s.io/kubernetes' go.mod is needed, but the command fetches the whole module first.
    progress(f"downloading k8s.io/kubernetes v{version}")
    download = subprocess.run(
        ["go", "mod", "download", "-json", f"k8s.io/kubernetes@v{version}"],
        cwd=module,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **GO_ENV},
    )
    go_mod = Path(json.loads(download.stdout)["GoMod"]).read_text()
    staging_version = "v0." + version.split(".", 1)[1]
    edits = [f"-require=k8s.io/kubernetes@v{version}"] + [
        f"-replace={m}={m}@{staging_version}" for m in staging_modules(go_mod)
    ]
    run_logged(["go", "mod", "edit", *edits], cwd=module, log=log, env=GO_ENV)
    packages = [f"k8s.io/kubernetes/cmd/{command}" for command in commands]
    go = _GoCommands(module, log, progress)
    go.run("get", *[f"{package}@v{version}" for package in packages])
    # One build for all commands: packages they share are compiled once, and both cores stay
    # busy across command boundaries. `-o <dir>/` names each binary after its command.
    ldflags = f"-s -w {kubernetes_version_ldflags(version)}"
    go.run("build", "-v", "-trimpath", "-ldflags", ldflags, "-o", f"{target}/", *packages)


def build_kubernetes(scratch: Path, target: Path, progress: reporting.Progress) -> None:
    """The control plane: kube-apiserver and kube-controller-manager."""
    _build_kubernetes_commands(
        scratch, target, progress, ("kube-apiserver", "kube-controller-manager")
    )


def build_kubernetes_node(scratch: Path, target: Path, progress: reporting.Progress) -> None:
    """A worker node's components and the matching client: kubelet, kube-scheduler, kube-proxy
    and kubectl (k8s.io/kubernetes/cmd/kubectl, a thin main over k8s.io/kubectl)."""
    _build_kubernetes_commands(
        scratch, target, progress, ("kubelet", "kube-scheduler", "kube-proxy", "kubectl")
    )


def build_etcd(scratch: Path, target: Path, progress: reporting.Progress) -> None:
    """etcd's server from go.etcd.io/etcd/server/v3 (its main package), through a wrapper module.

    The etcd module replaces its sibling modules with local paths; a wrapper module that requires
    the server module gets each sibling at its published version of the same release instead.
    """
    log = target / "build.log"
    go = _GoCommands(_go_wrapper_module(scratch, log), log, progress)
    package = "go.etcd.io/etcd/server/v3"
    go.run("get", f"{package}@v{versions.ETCD}")
    go.run("build", "-v", "-trimpath", "-ldflags", "-s -w", "-o", target / "etcd", package)


def _go_install(target: Path, progress: reporting.Progress, package: str, ldflags: str) -> None:
    """`go install package@version` into `target`.

    Only for modules without replace directives: go install refuses a module that has any (so a
    pin that adds some fails loudly, and needs etcd's wrapper-module recipe instead).
    """
    # -mod=mod is refused outside a main module, and there is none here.
    env = {**GO_ENV, "GOBIN": str(target), "GOFLAGS": ""}
    go = _GoCommands(target, target / "build.log", progress, env)
    go.run("install", "-v", "-trimpath", "-ldflags", ldflags, package)


def helm_ldflags(helm_version: str, kubernetes_version: str) -> str:
    """Helm's own version, and the Kubernetes version offline `helm template`/`lint` assume."""
    major, minor, _ = kubernetes_version.split(".")
    flags = [f"-X helm.sh/helm/v3/internal/version.version=v{helm_version}"]
    for package in ("helm.sh/helm/v3/pkg/lint/rules", "helm.sh/helm/v3/pkg/chartutil"):
        flags += [f"-X {package}.k8sVersionMajor={major}", f"-X {package}.k8sVersionMinor={minor}"]
    return " ".join(flags)


def build_helm(scratch: Path, target: Path, progress: reporting.Progress) -> None:
    """The helm CLI, `go install`ed at the pinned release (helm has no replace directives)."""
    ldflags = f"-s -w {helm_ldflags(versions.HELM, versions.KUBERNETES)}"
    _go_install(target, progress, f"helm.sh/helm/v3/cmd/helm@v{versions.HELM}", ldflags)


def build_coredns(scratch: Path, target: Path, progress: reporting.Progress) -> None:
    """CoreDNS (the main package at the root of github.com/coredns/coredns), default plugins.

    Its go.mod has no replace directives, so it is `go install`ed as released. Its version is a
    constant in the source (`coredns -version` reports it); only the commit is left unstamped.
    """
    package = f"github.com/coredns/coredns@v{versions.COREDNS}"
    _go_install(target, progress, package, "-s -w")


def build_local_path_provisioner(scratch: Path, target: Path, progress: reporting.Progress) -> None:
    """Rancher's local-path provisioner (the main package at its module root).

    Its go.mod has no replace directives (checked for the pinned release; it vendors its
    dependencies, which module mode ignores), so it is `go install`ed as released, with the
    version its own build script stamps into `main.VERSION`.
    """
    version = versions.LOCAL_PATH_PROVISIONER
    package = f"github.com/rancher/local-path-provisioner@v{version}"
    _go_install(target, progress, package, f"-s -w -X main.VERSION=v{version}")


def build_seaweedfs(scratch: Path, target: Path, progress: reporting.Progress) -> None:
    """SeaweedFS's `weed` (master, volume, filer and S3 gateway in one binary).

    Its go.mod replaces a dependency, so `go install` refuses it and a wrapper module would lose
    the replacement: the module is downloaded, copied out of the read-only module cache, and
    built as the main module it is.
    """
    log = target / "build.log"
    module = f"github.com/seaweedfs/seaweedfs@v{versions.SEAWEEDFS}"
    progress(f"downloading {module}")
    download = subprocess.run(
        ["go", "mod", "download", "-json", module],
        cwd=_go_wrapper_module(scratch, log),
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **GO_ENV},
    )
    source = scratch / "seaweedfs"
    # The module cache's files and directories are read-only; the build writes go.sum, and the
    # scratch directory must be removable: fresh files, and directories made writable.
    shutil.copytree(json.loads(download.stdout)["Dir"], source, copy_function=shutil.copyfile)
    for directory in (source, *(entry for entry in source.rglob("*") if entry.is_dir())):
        directory.chmod(0o755)
    go = _GoCommands(source, log, progress)
    go.run("build", "-v", "-trimpath", "-ldflags", "-s -w", "-o", target / "weed", "./weed")
