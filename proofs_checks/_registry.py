"""The registry of claim checks: one check per claim ID of docs/claims.md, each with a negative control.

docs/claims.md is the toolkit's claims register: every built-in check ID (``C7``, ``E5``, ``X1``, ...) has an
entry there, anchored ``<a id="c7"></a>``, stating what the paper says, the precise statement the check holds it
to, and the tests that cover it; the report links each built-in ID to that entry.

A check is a pure function ``fn(key, budget) -> Outcome``. It measures, decides a verdict (``confirmed``: the
paper's statement holds as printed; ``corrected``: the paper's statement fails but docs/claims.md's correction holds;
``refuted``: the paper's statement fails and the measurement confirms the refutation), and runs a negative
control — a variant that MUST fail — so that a check that cannot fail is caught.

A check *passes* when its measured verdict equals the expected verdict of docs/claims.md and its negative control
failed. Users register their own checks with :func:`register_check`::

    from proofs_checks import register_check, Outcome, Control

    @register_check("MY1", claim="My proxy keeps the sign balance within 1e-3.",
                    paper_says="—", expected="confirmed")
    def my_check(key, budget):
        ...
        return Outcome(verdict="confirmed", measured="…", method="…", statistic={...},
                       tolerance="…", control=Control("…", "…", failed=True))
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax

__all__ = [
    "VERDICTS",
    "Budget",
    "Check",
    "Control",
    "Outcome",
    "check_key",
    "get_checks",
    "register_check",
    "registry",
    "unregister_check",
]

VERDICTS = ("confirmed", "corrected", "refuted")
_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,31}$")


@dataclass(frozen=True)
class Budget:
    """Monte Carlo sizes. ``quick`` is the test-suite size (whole run within 3 min on 2 cores); ``scale``
    multiplies the full sizes (``--budget``)."""

    scale: float = 1.0
    quick: bool = False

    def n(self, full: int, quick: int | None = None) -> int:
        """A Monte Carlo size: ``quick`` in quick mode (default ``full // 10``), else ``full * scale``."""
        if self.quick:
            return max(1, int(quick if quick is not None else full // 10))
        return max(1, round(full * self.scale))


@dataclass(frozen=True)
class Control:
    """The negative control of a check: a variant that must fail.

    Attributes:
      description: what was changed (e.g. "paper's '>= median' split").
      measured: one line with its statistic.
      failed: ``True`` when the control failed as it must.
      statistic: numbers behind ``measured``.
    """

    description: str
    measured: str
    failed: bool
    statistic: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    """What a check function returns.

    Attributes:
      verdict: measured verdict, one of ``confirmed``, ``corrected``, ``refuted``.
      measured: one line for the report table.
      method: how it was measured (exact enumeration, Monte Carlo with n trials, ...).
      statistic: the numbers (JSON-serialisable).
      tolerance: the tolerance or threshold and why (≈5 SE, chi-square p > 1e-3 with its false-alarm rate, ...).
      control: the negative control.
      plot_data: JSON-serialisable data for the check's figure (the report never recomputes).
    """

    verdict: str
    measured: str
    method: str
    statistic: dict[str, Any]
    tolerance: str
    control: Control
    plot_data: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")


@dataclass(frozen=True)
class Check:
    """A registered check.

    Attributes:
      id: the claim ID (``C7``, ``E5``, ``X1``, or a user ID).
      claim: the claim in one sentence, as docs/claims.md states it (corrected where it corrects the paper).
      paper_says: what the paper says, in one sentence.
      expected: the verdict docs/claims.md expects.
      fn: ``fn(key, budget) -> Outcome``.
      plot: optional ``plot(plot_data, ax) -> ax`` drawing the figure from saved data.
      figure_caption: caption for the report.
    """

    id: str
    claim: str
    paper_says: str
    expected: str
    fn: Callable[[jax.Array, Budget], Outcome]
    plot: Callable[[dict[str, Any], Any], Any] | None = None
    figure_caption: str = ""


_REGISTRY: dict[str, Check] = {}


def _sort_key(check_id: str) -> tuple:
    m = re.match(r"^([A-Z]+)(\d+)$", check_id)
    order = {"C": 0, "E": 1, "X": 2}
    if m:
        return (order.get(m.group(1), 3), m.group(1), int(m.group(2)), "")
    return (4, check_id, 0, check_id)


def register_check(
    check_id: str,
    *,
    claim: str,
    paper_says: str,
    expected: str,
    plot: Callable[[dict[str, Any], Any], Any] | None = None,
    figure_caption: str = "",
    replace: bool = False,
) -> Callable[[Callable[[jax.Array, Budget], Outcome]], Callable[[jax.Array, Budget], Outcome]]:
    """Decorator registering ``fn(key, budget) -> Outcome`` as the check of ``check_id``.

    Raises:
      ValueError: a malformed ID, an unknown expected verdict, or an ID already registered (unless ``replace``).
    """
    if not _ID.match(check_id):
        raise ValueError(f"check_id must match {_ID.pattern}, got {check_id!r}")
    if expected not in VERDICTS:
        raise ValueError(f"expected must be one of {VERDICTS}, got {expected!r}")

    def deco(fn: Callable[[jax.Array, Budget], Outcome]) -> Callable[[jax.Array, Budget], Outcome]:
        if check_id in _REGISTRY and not replace:
            raise ValueError(f"a check with id {check_id!r} is already registered (pass replace=True)")
        _REGISTRY[check_id] = Check(check_id, claim, paper_says, expected, fn, plot, figure_caption)
        return fn

    return deco


def unregister_check(check_id: str) -> None:
    """Remove a check (e.g. a user check registered in a test)."""
    _REGISTRY.pop(check_id, None)


def registry() -> dict[str, Check]:
    """All registered checks (built-ins are loaded on first call), in claim order."""
    from proofs_checks import checks as _builtin  # noqa: F401  (registers the built-in checks)

    return {k: _REGISTRY[k] for k in sorted(_REGISTRY, key=_sort_key)}


def get_checks(only: list[str] | None = None) -> list[Check]:
    """The checks to run; ``only`` selects IDs (case-insensitive). Unknown IDs raise ``ValueError``."""
    reg = registry()
    if not only:
        return list(reg.values())
    upper = {k.upper(): k for k in reg}
    missing = [i for i in only if i.upper() not in upper]
    if missing:
        raise ValueError(f"unknown check id(s) {', '.join(missing)}; known: {', '.join(reg)}")
    return [reg[upper[i.upper()]] for i in dict.fromkeys(only)]


def check_key(seed: int, check_id: str) -> jax.Array:
    """The key of one check: ``fold_in(key(seed), crc32(id))`` — independent of which other checks run."""
    return jax.random.fold_in(jax.random.key(seed), zlib.crc32(check_id.encode()) & 0x7FFFFFFF)
