"""What the project declares agrees with itself: the rules' conda environment pins every
runtime dependency, and the Snakefile's min_version is pyproject.toml's Snakemake floor."""

from __future__ import annotations

import re
import tomllib
from typing import Any

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.helpers import REPO


def project() -> dict[str, Any]:
    with (REPO / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)["project"]  # type: ignore[no-any-return]


def dependencies() -> dict[str, Requirement]:
    reqs = [Requirement(r) for r in project()["dependencies"]]
    return {canonicalize_name(r.name): r for r in reqs}


def conda_env() -> tuple[list[str], list[str]]:
    """(conda packages, pip lines) of envs/kora.yaml."""
    env = yaml.safe_load((REPO / "envs" / "kora.yaml").read_text())
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    (pip,) = [d["pip"] for d in env["dependencies"] if isinstance(d, dict)]
    return conda, pip


def test_the_conda_env_pins_every_runtime_dependency() -> None:
    conda, pip = conda_env()
    # python and pip exactly (conda's "=X.Y.Z")
    assert {c.split()[0] for c in conda} == {"python", "pip"}
    for c in conda:
        assert re.fullmatch(r"\S+ =\d+\.\d+\.\d+", c), c
    requires_python = project()["requires-python"]
    python = next(c for c in conda if c.startswith("python ")).split("=")[1]
    assert Requirement(f"python{requires_python}").specifier.contains(python)
    # the project itself, and each of its dependencies at one exact version
    assert pip[-1] == "-e .."
    pins = [Requirement(line) for line in pip[:-1]]
    pinned = {canonicalize_name(r.name): r for r in pins}
    assert len(pinned) == len(pins), "a package is pinned twice"
    wanted = dependencies()
    assert set(pinned) == set(wanted), "envs/kora.yaml and pyproject.toml list other packages"
    for name, pin in pinned.items():
        (spec,) = pin.specifier
        assert spec.operator == "==", pin
        assert wanted[name].specifier.contains(spec.version), f"{pin} vs {wanted[name]}"


def test_min_version_is_the_declared_snakemake_floor() -> None:
    found = re.findall(r'^min_version\("([^"]+)"\)', (REPO / "Snakefile").read_text(), re.M)
    assert len(found) == 1, "the Snakefile calls min_version once"
    floors = [s.version for s in dependencies()["snakemake"].specifier if s.operator == ">="]
    assert [Version(v) for v in floors] == [Version(found[0])]
