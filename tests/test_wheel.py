"""The wheel stands on its own: the four typed packages, nothing else, and ``pmark check`` runs from it.

Slow (a build, a fresh environment and a quick check: about a minute). The fresh environment takes the wheel
alone: it is created without pip, the wheel is installed into it by this environment's pip (``--python``), and
the third-party dependencies come from this environment's site-packages through a ``.pth`` file (lines of a
``.pth`` file only extend ``sys.path``; the editable install's own ``.pth`` hook there is not run, so the
repository is not importable). The check runs from a temporary folder with ``PYTHONPATH`` unset.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("pmark_theory", "simulations", "proofs_checks", "pmark_impl")

pytestmark = pytest.mark.slow


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 600):
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, (argv, proc.stdout[-2000:], proc.stderr[-3000:])
    return proc


def _source_copy(dest: Path) -> Path:
    """The repository's files (tracked, or new and not ignored) copied to ``dest``: a clean tree to build from."""
    listing = _run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT).stdout
    for name in filter(None, listing.split("\0")):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


def test_wheel_contents_and_a_check_from_the_installed_wheel(tmp_path):
    dist = tmp_path / "dist"
    source = _source_copy(tmp_path / "source")  # builds in a copy: no build/ left in the repository
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(source),
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(dist),
        ],
        cwd=tmp_path,
    )
    [wheel] = dist.glob("pmark_toolkit-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops - set(PACKAGES) == {next(t for t in tops if t.endswith(".dist-info"))}
    for package in PACKAGES:
        assert f"{package}/__init__.py" in names and f"{package}/py.typed" in names
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "docs/", "src/"))]
    assert "proofs_checks/checks/__init__.py" in names and "proofs_checks/validate/__init__.py" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "pmark = pmark_impl.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path)
    python = venv / "bin" / "python"
    site = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=tmp_path
        ).stdout.strip()
    )
    (site / "_pmark_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", str(wheel)],
        cwd=tmp_path,
    )

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    work = tmp_path / "work"
    work.mkdir()
    where = _run(
        [
            str(python),
            "-c",
            "import json, sys, pmark_theory, simulations, proofs_checks, pmark_impl as m;"
            "print(json.dumps({'files': [p.__file__ for p in (pmark_theory, simulations, proofs_checks, m)],"
            " 'path': sys.path}))",
        ],
        cwd=work,
        env=env,
    )
    info = json.loads(where.stdout)
    for file in info["files"]:
        assert Path(file).resolve().is_relative_to(site.resolve()), file
    assert str(ROOT) not in info["path"] and str(source) not in info["path"]

    version = _run([str(venv / "bin" / "pmark"), "--version"], cwd=work, env=env)
    assert version.stdout.startswith("pmark ")
    _run(
        [str(venv / "bin" / "pmark"), "check", "--quick", "--only", "C7", "X1", "--out", "rep"],
        cwd=work,
        env=env,
    )
    results = json.loads((work / "rep" / "results.json").read_text())
    assert "C7" in json.dumps(results) and "X1" in json.dumps(results)
    assert (work / "rep" / "report.md").is_file()

    # the audit's copy-me test file, alone in an empty folder, against the installed wheel only (issue 27)
    mine = tmp_path / "mine"
    mine.mkdir()
    shutil.copy(ROOT / "examples" / "test_audit_copy_me.py", mine / "test_audit_copy_me.py")
    run = _run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(mine), str(mine)],
        cwd=mine,
        env=env,
    )
    assert "2 passed" in run.stdout
