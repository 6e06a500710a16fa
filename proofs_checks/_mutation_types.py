"""The two types of a mutation guard (see :mod:`proofs_checks.mutations`): kept apart so that the per-topic
tables (``_mutations_*``) and the assembled table import them without a cycle."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

__all__ = ["Mutation", "Patcher"]


class Patcher(Protocol):
    """What :attr:`Mutation.apply` needs: the two methods of pytest's ``MonkeyPatch`` that it uses."""

    def setattr(self, target: Any, name: str, value: Any) -> None: ...

    def setitem(self, dic: Any, name: Any, value: Any) -> None: ...


class Mutation(NamedTuple):
    """A deliberately wrong variant of the code a check relies on.

    Attributes:
      description: what is wrong, in one line (the report's "mutation" column).
      apply: ``apply(patcher)`` installs the wrong variant through ``patcher`` (pytest's ``monkeypatch``).
      target: where it is patched (a module attribute or a dict entry, as the check looks it up).
    """

    description: str
    apply: Callable[[Patcher], None]
    target: str = ""
