"""Helpers of the plug-in tests: callables that are, and are not, registered attack plug-ins, and a way to install
a throw-away distribution that declares entry points.

:func:`wipe` stands for ``shutil.rmtree``: an ordinary importable callable that the toolkit must never call. If it
ever is called, it appends a line to the file named by ``PMARK_TEST_SENTINEL`` (a harmless, visible trace).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

try:
    from pmark_theory.infra.plugins import plugin
except ImportError:  # a tree without plug-ins (to show that the regression tests fail there): marks nothing

    def plugin(kind):  # type: ignore[no-redef]
        return lambda obj: obj


SENTINEL_ENV = "PMARK_TEST_SENTINEL"


def wipe(text: str, rng: np.random.Generator | None = None, **params: object) -> str:
    """NOT a plug-in: records that it was called (the tests assert it never is)."""
    sentinel = os.environ.get(SENTINEL_ENV)
    if sentinel:
        with open(sentinel, "a", encoding="utf-8") as fh:
            fh.write(f"wipe called on {text[:40]!r}\n")
    return ""


@plugin("attack")
def shout(text: str, rng: np.random.Generator, suffix: str = "!") -> str:
    """A registered attack plug-in: upper-cases the text and appends ``suffix``."""
    return text.upper() + suffix


class Marked:
    """A class marked as an attack plug-in (its subclass is not)."""

    def __init__(self, text: str, rng: np.random.Generator) -> None:
        self.text = text


plugin("attack")(Marked)


class Unmarked(Marked):
    """Inherits the marked class's attribute, but is not itself registered."""


class Liar:
    """Answers every attribute lookup with the marker's value (``__getattr__`` must not be trusted)."""

    def __getattr__(self, name: str) -> str:
        return "attack"

    def __call__(self, text: str, rng: np.random.Generator) -> str:
        return wipe(text)


liar = Liar()


def install_distribution(
    root: Path, dist: str, entry_points: dict[str, str], modules: dict[str, str], group: str = "pmark.attacks"
) -> None:
    """Write ``dist-1.0.dist-info`` (METADATA, entry_points.txt of ``group``) and ``modules`` under ``root``.

    The caller puts ``root`` on ``sys.path`` afterwards (``monkeypatch.syspath_prepend``, which also clears the
    import caches) and removes the modules from ``sys.modules`` with :func:`forget_modules`.
    """
    info = root / f"{dist}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n", encoding="utf-8")
    lines = [f"[{group}]", *(f"{name} = {target}" for name, target in entry_points.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for name, source in modules.items():
        (root / f"{name}.py").write_text(source, encoding="utf-8")


def forget_modules(prefix: str) -> None:
    """Drop the modules named ``prefix*`` from ``sys.modules`` (a test's throw-away modules)."""
    for name in [m for m in sys.modules if m.startswith(prefix)]:
        del sys.modules[name]
