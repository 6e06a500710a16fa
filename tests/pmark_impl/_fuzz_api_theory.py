"""Hypothesis strategies of ``pmark_theory`` calls with exact oracles: the hard-count p-value, the Harrell–Davis
median and weights, the Clopper–Pearson interval (issue 24's numeric cases).

Oracles are independent of the code under test: binomial tails summed with big integers, Harrell–Davis weights
from ``scipy.stats.beta.cdf``, the Clopper–Pearson ends checked through their defining equations with the
binomial CDF (not ``betaincinv``). Huge but valid arguments must give the exact answer or a clear
``PMarkValueError``; wrong Python types (complex, strings, bools, ``None``) must raise.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
from _fuzz_harness import ApiCase, short_repr
from hypothesis import strategies as st
from scipy import stats


# --------------------------------------------------------------------------------------------------------------
def exact_log_tail(g: int, n: int) -> float:
    """``log P(Bin(n, 1/2) >= g)`` with big integers (exact up to the final rounding)."""
    if g <= 0:
        return 0.0
    total = sum(math.comb(n, k) for k in range(g, n + 1))
    return math.log(total) - n * math.log(2)


INTS_BAD = (-1, 1.5, float("nan"), float("inf"), "3", None, True, 2 + 0j, [1, 2], 10**30, 2**63, -(2**63))


@st.composite
def hard_count_cases(draw: Any) -> ApiCase:
    from pmark_theory import hard_count_log_pvalue, hard_count_pvalue

    fn = draw(st.sampled_from((hard_count_log_pvalue, hard_count_pvalue)))
    if draw(st.integers(0, 3)):
        n = draw(st.sampled_from((0, 1, 2, 10, 100, 1100, 2000, 3000)) | st.integers(0, 3000))
        g = draw(st.sampled_from((0, n, n // 2, max(0, n - 1))) | st.integers(0, n))
        g = type(g)(g) if draw(st.booleans()) else np.int64(g)
        exact = exact_log_tail(int(g), n)

        def judge(v: Any, _f: Path) -> list[str]:
            want = exact if fn is hard_count_log_pvalue else math.exp(exact)
            got = float(v)
            ok = math.isfinite(got) and abs(got - want) <= 1e-9 * max(1.0, abs(want))
            if fn is hard_count_pvalue and want < 1e-300:
                ok = math.isfinite(got) and 0.0 <= got <= 1e-290  # underflow to 0 is the float answer
            return [] if ok else [f"{fn.__name__}({g}, {n}) = {got!r}, exact {want!r}"]

        return ApiCase(
            "api:hard_count_log_pvalue", f"{fn.__name__}({g!r}, {n!r})", lambda _f: fn(g, n), judge
        )
    bad = draw(st.sampled_from(INTS_BAD))
    g, n = draw(st.sampled_from(((bad, 10), (3, bad), (11, 10), (-1, -1))))
    if is_count(g) and is_count(n) and g <= n:  # a huge but valid n: an exact value or a clear error

        def judge_big(v: Any, _f: Path) -> list[str]:
            got = float(v) if fn is hard_count_log_pvalue else math.log(float(v))
            return [] if abs(got) <= 1e-9 else [f"{fn.__name__}({g}, {n}) = {v!r}, exact ~ 0 (log) / 1"]

        return ApiCase(
            "api:hard_count_log_pvalue", f"{fn.__name__}({g!r}, {n!r})", lambda _f: fn(g, n), judge_big
        )
    if isinstance(g, list) or isinstance(n, list):
        return ApiCase(
            "api:hard_count_log_pvalue",
            f"{fn.__name__}({g!r}, {n!r})",
            lambda _f: fn(g, n),
            must_raise=not isinstance(g, list),
        )
    return ApiCase(
        "api:hard_count_log_pvalue", f"{fn.__name__}({g!r}, {n!r})", lambda _f: fn(g, n), must_raise=True
    )


def is_count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _hd_oracle(row: np.ndarray) -> float:
    n = row.size
    if n == 1:
        return float(row[0])
    a = (n + 1) / 2
    grid = np.arange(n + 1) / n
    w = np.diff(stats.beta.cdf(grid, a, a))
    return float(np.sort(row) @ w)


FLOATS = st.floats(allow_nan=False, allow_infinity=False, width=64)


@st.composite
def hd_median_cases(draw: Any) -> ApiCase:
    from pmark_theory import hd_median

    kind = draw(st.sampled_from(("floats", "floats", "huge", "matrix", "bad", "bad")))
    if kind in ("floats", "huge"):
        elems = FLOATS if kind == "floats" else st.sampled_from((1.7e308, -1.7e308, 1e308, 5e-324, 0.0))
        x = draw(st.lists(elems, min_size=1, max_size=40))
        as_array = draw(st.booleans())

        def judge(v: Any, _f: Path) -> list[str]:
            got = float(v)
            arr = np.asarray(x, dtype=float)
            lo, hi = float(arr.min()), float(arr.max())
            tol = 1e-12 * max(abs(lo), abs(hi)) + 1e-300  # subnormal inputs may round to 0
            if not (math.isfinite(got) and lo - tol <= got <= hi + tol):
                return [f"hd_median({short_repr(x)}) = {got!r}, outside [min, max] = [{lo!r}, {hi!r}]"]
            want = _hd_oracle(arr)
            if math.isfinite(want) and abs(got - want) > 1e-9 * max(1.0, abs(want)) + 1e-9 * (hi - lo):
                return [f"hd_median({short_repr(x)}) = {got!r}, oracle {want!r}"]
            return []

        return ApiCase(
            "api:hd_median",
            f"hd_median({'np.array' if as_array else ''}({x!r}))",
            lambda _f: hd_median(np.array(x) if as_array else x),
            judge,
        )
    if kind == "matrix":
        rows, cols = draw(st.integers(1, 4)), draw(st.integers(1, 6))
        x = np.array(
            draw(
                st.lists(FLOATS.filter(lambda f: abs(f) < 1e300), min_size=rows * cols, max_size=rows * cols)
            )
        ).reshape(rows, cols)
        axis = draw(st.sampled_from((0, 1, -1, -2)))

        def judge_m(v: Any, _f: Path) -> list[str]:
            want = np.apply_along_axis(_hd_oracle, axis, x)
            got = np.asarray(v, dtype=float)
            if got.shape != want.shape or not np.allclose(got, want, rtol=1e-9, atol=1e-9 * np.abs(x).max()):
                return [f"hd_median(x{x.shape}, axis={axis}) = {got!r}, oracle {want!r}"]
            return []

        return ApiCase(
            "api:hd_median",
            f"hd_median(np.array({x.tolist()!r}), axis={axis})",
            lambda _f: hd_median(x, axis=axis),
            judge_m,
        )
    bad = draw(
        st.sampled_from(
            (
                ("[1+2j, 3+0j]", lambda: [1 + 2j, 3 + 0j]),
                ("np.array([1+2j, 3])", lambda: np.array([1 + 2j, 3])),
                ("np.array([1, 2], dtype=complex)", lambda: np.array([1, 2], dtype=complex)),
                ("[1.0, nan]", lambda: [1.0, float("nan")]),
                ("[1.0, inf]", lambda: [1.0, float("inf")]),
                ("[]", lambda: []),
                ("5.0", lambda: 5.0),
                ("['a', 'b']", lambda: ["a", "b"]),
                ("[[1, 2], [3]]", lambda: [[1, 2], [3]]),
                ("None", lambda: None),
                ("[10**400]", lambda: [10**400]),
                ("np.array(['1', '2'])", lambda: np.array(["1", "2"])),
                ("[object()]", lambda: [object()]),
            )
        )
    )
    axis = draw(st.sampled_from((-1, 0, 5, True, 1.5, "0")))
    # complex, bools, strings and objects are not real numbers: refused, never silently converted
    return ApiCase(
        "api:hd_median",
        f"hd_median({bad[0]}, axis={axis!r})",
        lambda _f: hd_median(bad[1](), axis=axis),
        must_raise=True,
    )


@st.composite
def hd_weights_cases(draw: Any) -> ApiCase:
    from pmark_theory import hd_weights

    n = draw(
        st.sampled_from((1, 2, 3, 10, 999, 0, -1, 1.5, True, "3", None, 2**62, 2**63 - 1, 2**63, 10**30))
    )
    valid = isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 1000

    def judge(v: Any, _f: Path) -> list[str]:
        w = np.asarray(v, dtype=float)
        if not valid:
            return [f"hd_weights({n!r}) returned {w.size} weights instead of raising"]
        want = (
            np.diff(stats.beta.cdf(np.arange(n + 1) / n, (n + 1) / 2, (n + 1) / 2)) if n > 1 else np.ones(1)
        )
        if w.shape != (n,) or not np.allclose(w, want, atol=1e-12):
            return [f"hd_weights({n}) differs from the Beta-CDF weights"]
        return []

    return ApiCase(
        "api:hd_median",
        f"hd_weights({n!r})",
        lambda _f: hd_weights(n),
        judge,
        must_raise=not valid and not (isinstance(n, int) and n > 1000),
    )


def _solves(f: Callable[[float], float], x: float, target: float, ulps: int = 16) -> bool:
    """``f(x) == target`` within 0.1%, or ``f`` (increasing) crosses ``target`` within ``ulps`` floats of ``x``
    (near 0 or 1 the best float can be that far from the exact root)."""
    if math.isclose(f(x), target, rel_tol=1e-3):
        return True
    below, above = x, x
    for _ in range(ulps):
        below, above = math.nextafter(below, -math.inf), math.nextafter(above, math.inf)
    return f(max(below, 0.0)) <= target <= f(min(above, 1.0))


def cp_judge(k: int, n: int, conf: float) -> Callable[[Any, Path], list[str]]:
    """Oracle of ``clopper_pearson(k, n, conf)``: an interval in [0, 1] holding ``k/n``, closed ends at
    ``k = 0`` / ``k = n``, and (``n <= 10**6``) ends solving their defining binomial-tail equations."""

    def judge(v: Any, _f: Path) -> list[str]:
        lo, hi = (float(t) for t in v)
        where = f"clopper_pearson({k}, {n}, {conf}) = ({lo!r}, {hi!r})"
        if not (math.isfinite(lo) and math.isfinite(hi) and 0.0 <= lo <= hi <= 1.0):
            return [f"{where}: not an interval in [0, 1]"]
        if n == 0:
            return [] if (lo, hi) == (0.0, 1.0) else [f"{where}: n = 0 must give (0, 1)"]
        rate = Fraction(k, n)
        if not (
            Fraction(lo) <= rate * (1 + Fraction(1, 10**9))
            and rate <= Fraction(hi) * (1 + Fraction(1, 10**9))
        ):
            return [f"{where}: does not contain k/n = {float(rate)!r}"]
        if n <= 2**40 and (
            (k == 0) != (lo == 0.0) or (k == n) != (hi == 1.0)
        ):  # beyond, ends may round to 0/1
            return [f"{where}: the ends at k = 0 / k = n are wrong"]
        a = 1.0 - conf
        if n <= 10**6:  # the defining equations, through the binomial CDF (independent of betaincinv)
            if k > 0 and not _solves(lambda p: stats.binom.sf(k - 1, n, p), lo, a / 2):
                return [f"{where}: P(X >= k | lo) = {stats.binom.sf(k - 1, n, lo)!r} != {a / 2!r}"]
            if k < n and not _solves(lambda p: -stats.binom.cdf(k, n, p), hi, -a / 2):
                return [f"{where}: P(X <= k | hi) = {stats.binom.cdf(k, n, hi)!r} != {a / 2!r}"]
        return []

    return judge


@st.composite
def clopper_pearson_cases(draw: Any) -> ApiCase:
    from pmark_theory import clopper_pearson, proportion

    fn = draw(st.sampled_from((clopper_pearson, clopper_pearson, proportion)))
    if draw(st.integers(0, 3)):
        n = draw(
            st.sampled_from(
                (0, 1, 2, 10, 1000, 10**6, 10**12, 2**53, 10**29, 10**30, 2**63 - 1, 2**63, 10**40)
            )
            | st.integers(0, 10**6)
        )
        k = draw(st.sampled_from((0, n, n // 2, n // 10, max(0, n - 1), min(n, 1))) | st.integers(0, n))
        conf = draw(st.sampled_from((0.95, 0.99, 0.5, 1e-9, 1 - 1e-12)))

        def judge(v: Any, f: Path) -> list[str]:
            pair = (v.lo, v.hi) if fn is proportion else v
            return cp_judge(k, n, conf)(pair, f)

        return ApiCase(
            "api:clopper_pearson", f"{fn.__name__}({k!r}, {n!r}, {conf!r})", lambda _f: fn(k, n, conf), judge
        )
    bad = draw(st.sampled_from(INTS_BAD))
    k, n, conf = draw(
        st.sampled_from(
            (
                (bad, 10, 0.95),
                (3, bad, 0.95),
                (11, 10, 0.95),
                (1, 10, bad),
                (1, 10, 0.0),
                (1, 10, 1.0),
                (1, 10, float("nan")),
            )
        )
    )
    valid = is_count(k) and is_count(n) and k <= n and isinstance(conf, float) and 0 < conf < 1
    return ApiCase(
        "api:clopper_pearson",
        f"{fn.__name__}({k!r}, {n!r}, {conf!r})",
        lambda _f: fn(k, n, conf),
        (lambda v, f: cp_judge(k, n, conf)((v.lo, v.hi) if fn is proportion else v, f)),
        must_raise=not valid,
    )


def exact_critical(n: int, alpha: float) -> int:
    total = 2**n
    tail = 0
    for k in range(n, -1, -1):  # the smallest k with P(X >= k) <= alpha
        if Fraction(tail + math.comb(n, k), total) > Fraction(alpha):
            return k + 1
        tail += math.comb(n, k)
    return 0
