"""SemStamp (Hou et al., NAACL 2024; C5, C6, E3): cells are the sign patterns of ``h`` key-derived LSH normals.

``M = 2**lsh_dim`` cells; a candidate is valid when its cell is green (and, with ``margin > 0``, its smallest
``|cos|`` with the normals is at least the margin: the reference implementation's rejection). Everything else —
green sets, retries, fallback, detection — is :mod:`pmark_impl.schemes._cells`.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pmark_impl._limits import check_limit
from pmark_impl.schemes._base import Option
from pmark_impl.schemes._cells import cell_scheme
from pmark_theory._cell_rules import lsh_cells, lsh_margin_ok
from pmark_theory._validate import check_positive_int

__all__ = ["SCHEME", "lsh_hyperplanes"]

_lsh_cells = jax.jit(lsh_cells)
_lsh_margin_ok = jax.jit(lsh_margin_ok)


def lsh_hyperplanes(key: Any, h: int) -> np.ndarray:
    """The key's ``h`` LSH normals float64 ``[h, d]`` (iid Gaussian), from ``HMAC(secret, "semstamp/hyperplanes/h")``."""
    h = check_positive_int("lsh_dim", h)
    return key.numpy_rng(f"semstamp/hyperplanes/{h}").standard_normal((h, key.dim))


def _cell_map(key: Any, settings: Any) -> tuple[Any, int]:
    h = int(settings["lsh_dim"])
    planes = jnp.asarray(lsh_hyperplanes(key, h))
    return (lambda e: _lsh_cells(e, planes)), 2**h


def _margin_rule(key: Any, settings: Any, margin: float) -> Any:
    planes = jnp.asarray(lsh_hyperplanes(key, int(settings["lsh_dim"])))
    m = jnp.asarray(margin)
    return lambda e: _lsh_margin_ok(e, planes, m)


SCHEME = cell_scheme(
    "semstamp",
    "SemStamp: LSH cells of h key-derived normals (M = 2^h), green-cell rejection sampling (C5, E3)",
    Option(
        "lsh_dim",
        3,
        lambda v: check_limit("lsh_dim", v),
        "LSH normals h: M = 2^h cells",
        detect=True,
    ),
    lambda settings: 2 ** int(settings["lsh_dim"]),
    _cell_map,
    _margin_rule,
)
