"""The repository's layout: one direction of imports, no pointers outside the repository, typed packages.

Imports go ``pmark_theory`` ← ``simulations`` ← ``proofs_checks`` and ``pmark_theory`` ← ``pmark_impl``. A module
reference is an ``import`` statement (at any depth, lazy ones included) or a string literal that names one of our
modules (what ``importlib.import_module`` is fed). The one documented exception: ``pmark_impl/cli/__init__.py``
forwards ``pmark check`` and ``pmark validate-proxy`` to ``proofs_checks`` — the module names sit in its
``EXTERNAL_COMMANDS`` table and are imported lazily by ``importlib.import_module`` inside ``_run_external``.
"""

from __future__ import annotations

import ast
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

import pmark_impl
import pmark_theory
import proofs_checks
import simulations

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("pmark_theory", "simulations", "proofs_checks", "pmark_impl")

#: package -> the packages of ours it must never reference.
FORBIDDEN = {
    "pmark_theory": {"simulations", "proofs_checks", "pmark_impl"},
    "simulations": {"proofs_checks", "pmark_impl"},
    "proofs_checks": {"pmark_impl"},
    "pmark_impl": {"simulations", "proofs_checks"},
}

#: The documented exception: (file, scope, kind, referenced package). ``scope`` is the enclosing function, or the
#: name assigned at module level; ``kind`` is "import" or "string".
ALLOWED = {
    ("pmark_impl/cli/__init__.py", "EXTERNAL_COMMANDS", "string", "proofs_checks"),
}
#: Where the exception's dynamic import happens (lazily, in a function).
LAZY_DISPATCH = ("pmark_impl/cli/__init__.py", "_run_external")

_MODULE_NAME = re.compile(rf"^({'|'.join(PACKAGES)})(\.[A-Za-z_]\w*)*(:[A-Za-z_]\w*)?$")


@dataclass(frozen=True)
class Reference:
    """One reference from a file to a module of ours."""

    file: str
    line: int
    scope: str  # enclosing function (qualified), the module-level assignment target, or "<module>"
    kind: str  # "import" or "string"
    target: str  # the referenced package

    def __str__(self) -> str:
        return f"{self.file}:{self.line} ({self.scope}): {self.kind} of {self.target}"


class _Scanner(ast.NodeVisitor):
    def __init__(self, file: str) -> None:
        self.file = file
        self.scopes: list[str] = []
        self.refs: list[Reference] = []

    def _scope(self) -> str:
        return ".".join(self.scopes) or "<module>"

    def _add(self, node: ast.AST, kind: str, module: str) -> None:
        top = module.split(".")[0]
        if top in PACKAGES:
            self.refs.append(Reference(self.file, node.lineno, self._scope(), kind, top))

    def _visit_scope(self, node: ast.AST, name: str) -> None:
        self.scopes.append(name)
        self.generic_visit(node)
        self.scopes.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._visit_scope(node, node.name)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._visit_scope(node, node.name)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._visit_scope(node, node.name)

    def _visit_assignment(self, node: ast.Assign | ast.AnnAssign, targets: list[ast.expr]) -> None:
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        if not self.scopes and names:
            self._visit_scope(node, names[0])
        else:
            self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        self._visit_assignment(node, node.targets)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._visit_assignment(node, [node.target])

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(node, "import", alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and node.module:
            self._add(node, "import", node.module)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and _MODULE_NAME.match(node.value):
            self._add(node, "string", node.value)


def scan_source(source: str, file: str) -> list[Reference]:
    """Every reference to a module of ours in ``source`` (the text of ``file``, a repository-relative path)."""
    scanner = _Scanner(file)
    scanner.visit(ast.parse(source, filename=file))
    return scanner.refs


def violations(refs: list[Reference]) -> list[Reference]:
    """The references that break the import direction, less the documented exception."""
    bad = []
    for ref in refs:
        package = ref.file.split("/")[0]
        if ref.target in FORBIDDEN[package] and (ref.file, ref.scope, ref.kind, ref.target) not in ALLOWED:
            bad.append(ref)
    return bad


def _package_files() -> list[Path]:
    files = sorted(f for p in PACKAGES for f in (ROOT / p).rglob("*.py"))
    assert len(files) > 20, files  # the scan does see the packages
    return files


def _scan_all() -> list[Reference]:
    refs = []
    for path in _package_files():
        refs += scan_source(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())
    return refs


def test_imports_go_one_way():
    bad = violations(_scan_all())
    assert not bad, "forbidden references:\n" + "\n".join(map(str, bad))


def test_the_documented_exception_is_lazy_and_only_in_the_cli():
    refs = _scan_all()
    used = [r for r in refs if r.file.startswith("pmark_impl/") and r.target in FORBIDDEN["pmark_impl"]]
    # Only the EXTERNAL_COMMANDS table names proofs_checks modules, and never simulations.
    assert used and {(r.file, r.scope, r.kind, r.target) for r in used} <= ALLOWED
    from pmark_impl import cli

    assert {m.split(".")[0] for m, _, _ in cli.EXTERNAL_COMMANDS.values()} == {"proofs_checks"}
    # The table's names are imported by importlib.import_module inside _run_external only, never at import time.
    file, function = LAZY_DISPATCH
    tree = ast.parse((ROOT / file).read_text(encoding="utf-8"))
    callers = [
        fn.name
        for fn in ast.walk(tree)
        if isinstance(fn, ast.FunctionDef)
        for call in ast.walk(fn)
        if isinstance(call, ast.Call) and ast.unparse(call.func) in {"importlib.import_module", "__import__"}
    ]
    assert callers == [function]


def test_importing_pmark_impl_does_not_import_proofs_checks_or_simulations():
    code = (
        "import sys, pmark_impl, pmark_impl.cli; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('proofs_checks', 'simulations')); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([_python(), "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _python() -> str:
    import sys

    return sys.executable


@pytest.mark.parametrize(
    ("source", "file", "expected"),
    [
        ("import simulations\n", "pmark_theory/_x.py", ["simulations"]),
        ("from proofs_checks.checks import X\n", "simulations/_x.py", ["proofs_checks"]),
        ("def f():\n    from pmark_impl import cli\n", "proofs_checks/_x.py", ["pmark_impl"]),  # lazy
        ("import importlib\nM = 'simulations._engine'\n", "pmark_impl/_x.py", ["simulations"]),  # string
        # the exception is tied to its file and scope: the same table elsewhere is a violation
        (
            "EXTERNAL_COMMANDS = {'c': ('proofs_checks.cli', 'main', '')}\n",
            "pmark_impl/_x.py",
            ["proofs_checks"],
        ),
        (
            "OTHER = {'c': ('proofs_checks.cli', 'main', '')}\n",
            "pmark_impl/cli/__init__.py",
            ["proofs_checks"],
        ),
        (
            "EXTERNAL_COMMANDS = {'c': ('simulations.cli', 'main', '')}\n",
            "pmark_impl/cli/__init__.py",
            ["simulations"],
        ),
        (
            "def _run_external():\n    import proofs_checks.cli\n",
            "pmark_impl/cli/__init__.py",
            ["proofs_checks"],
        ),
        # allowed: the direction, the exception itself, docstrings and prose
        ("import pmark_theory\nfrom simulations import x\n", "proofs_checks/_x.py", []),
        ("EXTERNAL_COMMANDS = {'c': ('proofs_checks.cli', 'main', '')}\n", "pmark_impl/cli/__init__.py", []),
        ('"""see proofs_checks.cli for the checks"""\n', "pmark_impl/_x.py", []),
    ],
)
def test_scanner_negative_controls(source, file, expected):
    assert [r.target for r in violations(scan_source(source, file))] == expected


def _repository_text_files() -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        capture_output=True,
        cwd=ROOT,
        check=True,
        timeout=60,
    ).stdout.decode()
    return [ROOT / name for name in out.split("\0") if name and (ROOT / name).is_file()]


#: Pointers outside the repository (spelled in pieces so that this file does not hold them).
OUTSIDE = ["../" + "shared", "shared/" + "paper", "shared/" + "CLAIMS", "DESIGN" + ".md"]


def test_nothing_points_outside_the_repository():
    files = _repository_text_files()
    assert any(f.name == "README.md" for f in files)
    hits = []
    for path in files:
        if path.relative_to(ROOT).as_posix() == "CHANGELOG.md":
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary
        hits += [f"{path.relative_to(ROOT)}: {needle}" for needle in OUTSIDE if needle in text]
    assert not hits, "\n".join(hits)


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_ships_py_typed(package):
    assert (ROOT / package / "py.typed").is_file()


@pytest.mark.parametrize("module", [pmark_theory, simulations, proofs_checks, pmark_impl])
def test_packages_are_imported_from_the_repository(module):
    path = Path(module.__file__).resolve()
    assert path.is_relative_to(ROOT), path
    assert path.parent == ROOT / module.__name__  # flat layout, no src/


def private_toolkit_imports(source: str) -> list[str]:
    """The imports in ``source`` of a private module of the toolkit (a ``_name`` part under ``pmark_*``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
        for name in names:
            parts = name.split(".")
            if parts[0].startswith("pmark_") and any(p.startswith("_") for p in parts[1:]):
                found.append(f"{node.lineno}: {name}")
    return found


def test_examples_import_only_public_names():
    """Issue 37: an example is what a user copies; it imports the toolkit's public faces only."""
    assert private_toolkit_imports(
        "from pmark_theory._validate import check_size\nimport pmark_impl.keys._keys\n"
    ) == [
        "1: pmark_theory._validate",
        "2: pmark_impl.keys._keys",
    ]  # the negative control: the scanner sees both spellings
    assert (
        private_toolkit_imports("from pmark_theory import plugin\nfrom examples.x._common import y\n") == []
    )
    bad = {
        path.relative_to(ROOT).as_posix(): hits
        for path in sorted((ROOT / "examples").rglob("*.py"))
        if (hits := private_toolkit_imports(path.read_text(encoding="utf-8")))
    }
    assert not bad, bad
