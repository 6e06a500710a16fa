"""``tests/examples/test_user_proxy_example.py`` is a file to copy (README): it must pass alone in an empty folder,
with no ``conftest.py`` (whose hypothesis profile sets ``deadline=None``) and nothing on the path beyond the
installed packages (issue 28: the copy failed on hypothesis's 200 ms deadline, the first example compiling JAX)."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent / "test_user_proxy_example.py"


def _settings_kwargs(tree: ast.Module) -> dict[str, dict[str, ast.expr]]:
    """Module-level ``NAME = settings(...)`` assignments: name -> keyword arguments."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            if isinstance(func, ast.Name) and func.id == "settings":
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        out[target.id] = {k.arg: k.value for k in node.value.keywords}
    return out


def test_every_property_test_sets_its_own_deadline_and_uses_no_fixture():
    tree = ast.parse(EXAMPLE.read_text(encoding="utf-8"))
    named = _settings_kwargs(tree)
    tests = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]
    assert tests
    for fn in tests:
        decos = fn.decorator_list
        uses_given = any(isinstance(d, ast.Call) and getattr(d.func, "id", "") == "given" for d in decos)
        kwargs: dict[str, ast.expr] = {}
        for d in decos:
            if isinstance(d, ast.Name) and d.id in named:
                kwargs.update(named[d.id])
            if isinstance(d, ast.Call) and getattr(d.func, "id", "") == "settings":
                kwargs.update({k.arg: k.value for k in d.keywords})
        if uses_given:
            deadline = kwargs.get("deadline")
            assert isinstance(deadline, ast.Constant) and deadline.value is None, f"{fn.name}: deadline=None"
            assert "max_examples" in kwargs, f"{fn.name}: set max_examples (the default profile draws 100)"
        else:  # a plain test may not ask pytest for a fixture that only the toolkit's conftest defines
            assert not fn.args.args, f"{fn.name} takes fixtures {[a.arg for a in fn.args.args]}"
        marks = [d for d in decos if "mark" in ast.unparse(d)]
        assert not marks, f"{fn.name}: markers are defined in the toolkit's pyproject, not in a copy"


def test_the_copy_me_file_passes_alone_in_an_empty_folder(tmp_path):
    shutil.copy(EXAMPLE, tmp_path / "test_my_proxy.py")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HYPOTHESIS_PROFILE")}
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            str(tmp_path),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "3 passed" in run.stdout
