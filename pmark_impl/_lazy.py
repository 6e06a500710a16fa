"""Lazy names of a face: imported from their module on first access (layer 0 of ``pmark_impl``).

A face whose modules pull in torch, transformers or JAX lists those names in a ``_LAZY = {name: module}`` table
and sets ``__getattr__ = lazy_getattr(__name__, _LAZY)``: ``import pmark_impl`` and ``pmark --help`` then load no
model library. Each access looks the name up in its module again, so a test that patches the module's attribute
is seen through the face.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_getattr"]


def lazy_getattr(package: str, table: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package`` that imports each name of ``table`` from its module when asked."""

    def __getattr__(name: str) -> Any:
        if name in table:
            return getattr(importlib.import_module(table[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
