"""Hypothesis strategies of the other public ``pmark_theory`` functions that take user numbers, with exact oracles:
``critical_count`` (big-integer tails), ``cosine_tail``, ``online_bit_accuracy``, ``offline_single_channel_tv``
(the closed form of C15), ``poisson_binomial_sf`` (enumeration with fractions), ``auc`` (pair counting),
``tpr_at_alpha`` and ``hard_count_z``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
from _fuzz_api_theory import exact_critical, is_count
from _fuzz_harness import ApiCase
from hypothesis import strategies as st
from scipy import stats


def critical_judge(n: int, alpha: float) -> Callable[[Any, Path], list[str]]:
    """Oracle of ``critical_count(n, alpha)``: exact tails up to ``n = 200``, the normal approximation beyond
    (the exact ``k`` is within a few units of ``n/2 + z_alpha sqrt(n)/2``)."""

    def judge(v: Any, _f: Path) -> list[str]:
        if n <= 200:
            want = exact_critical(n, alpha)
            return [] if v == want else [f"critical_count({n}, {alpha}) = {v}, exact {want}"]
        z = stats.norm.isf(alpha)
        off = (int(v) - n // 2) - z * math.isqrt(n) / 2  # integer part first: exact at n ~ 2**63
        if abs(off) <= 10 + 1e-6 * math.sqrt(n) * z:
            return []
        return [f"critical_count({n}, {alpha}) = {v}, {off:.3g} away from the normal approximation"]

    return judge


@st.composite
def theory_cases(draw: Any) -> ApiCase:
    """Other public ``pmark_theory`` functions that take user numbers."""
    import pmark_theory as T

    which = draw(
        st.sampled_from(
            (
                "critical_count",
                "cosine_tail",
                "online_bit_accuracy",
                "offline_single_tv",
                "poisson_binomial_sf",
                "auc",
                "tpr_at_alpha",
                "hard_count_z",
            )
        )
    )
    g = "api:theory"
    if which == "critical_count":
        n = draw(st.sampled_from((0, 1, 10, 48, 200, 10**5, 2**63 - 1, 10**30, -1, 1.5, True)))
        alpha = draw(st.sampled_from((0.01, 0.05, 1e-12, 0.0, 1.0, float("nan"))))
        ok = isinstance(n, int) and not isinstance(n, bool) and n >= 0 and 0 < alpha < 1

        return ApiCase(
            g,
            f"critical_count({n!r}, {alpha!r})",
            lambda _f: T.critical_count(n, alpha),
            critical_judge(n, alpha),
            must_raise=not ok,
        )
    if which == "cosine_tail":
        eps = draw(st.sampled_from((0.0, 0.08, 0.5, 1.0, 1.5, -0.1, float("nan"), "0.1")))
        d = draw(st.sampled_from((2, 3, 768, 65536, 1, 0, -1, 1.5, True, 10**30)))

        def judge_c(v: Any, _f: Path) -> list[str]:
            p = float(v)
            return (
                []
                if math.isfinite(p) and 0 <= p <= 1
                else [f"cosine_tail({eps}, {d}) = {p!r}, not in [0, 1]"]
            )

        bad = not (is_count(d) and d >= 2) or not (isinstance(eps, float) and math.isfinite(eps) and eps >= 0)
        return ApiCase(
            g,
            f"cosine_tail({eps!r}, {d!r})",
            lambda _f: T.cosine_tail(eps, d),
            judge_c,
            must_raise=bad and eps != "0.1",
        )
    if which == "online_bit_accuracy":
        n = draw(st.sampled_from((16, 64, 2, 2**20, 2**63 - 1, 0, 12, True)))
        b = draw(st.sampled_from((1, 4, 0, 64, True)))

        def judge_o(v: Any, _f: Path) -> list[str]:
            acc = np.asarray(v, dtype=float)
            if acc.shape != (b,) or not np.all((acc >= 0.5 - 1e-12) & (acc <= 1 + 1e-12)):
                return [f"online_bit_accuracy({n}, {b}) = {acc!r}: not {b} accuracies in [1/2, 1]"]
            return []

        return ApiCase(
            g,
            f"online_bit_accuracy({n!r}, {b!r})",
            lambda _f: T.online_bit_accuracy(n, b),
            judge_o,
            must_raise=isinstance(n, bool) or isinstance(b, bool) or n < 1 or b < 1,
        )
    if which == "offline_single_tv":
        p = draw(st.sampled_from((0.5, 0.3, 0.0, 1.0, 1e-300, -0.1, 1.1, float("nan"))))
        n = draw(st.sampled_from((1, 2, 16, 64, None, 0, -1, 2**63, 1.5, True)))
        ok = (isinstance(p, float) and 0 <= p <= 1) and (
            n is None or (isinstance(n, int) and not isinstance(n, bool) and n >= 1)
        )

        def judge_t(v: Any, _f: Path) -> list[str]:
            if p in (0.0, 1.0):
                want = 0.0  # no choice to make (E17)
            else:
                want = abs(p - 0.5) - (0.0 if n is None else 0.5 * abs(p**n - (1 - p) ** n))
            return (
                []
                if math.isclose(float(v), want, abs_tol=1e-12)
                else [f"offline_single_channel_tv({p}, {n}) = {v!r}, exact {want!r}"]
            )

        return ApiCase(
            g,
            f"offline_single_channel_tv({p!r}, {n!r})",
            lambda _f: T.offline_single_channel_tv(p, n),
            judge_t,
            must_raise=not ok,
        )
    if which == "poisson_binomial_sf":
        q = draw(st.lists(st.sampled_from((0.0, 0.25, 0.5, 1.0, 0.9)), min_size=0, max_size=8))
        k = draw(st.sampled_from((0, 1, 3, 8, 9, -1, 1.5)))
        bad_q = draw(st.sampled_from((None, [0.5, float("nan")], [1.5], [-0.1], "0.5")))
        if bad_q is not None and draw(st.booleans()):
            return ApiCase(
                g,
                f"poisson_binomial_sf({k!r}, {bad_q!r})",
                lambda _f: T.poisson_binomial_sf(k, bad_q),
                must_raise=True,
            )

        def judge_p(v: Any, _f: Path) -> list[str]:
            want = Fraction(0)
            for bits in range(2 ** len(q)):
                ones = bin(bits).count("1")
                if ones >= k:
                    pr = Fraction(1)
                    for i, qi in enumerate(q):
                        pr *= Fraction(qi) if bits >> i & 1 else 1 - Fraction(qi)
                    want += pr
            return (
                []
                if math.isclose(float(v), float(want), abs_tol=1e-12)
                else [f"poisson_binomial_sf({k}, {q}) = {v!r}, exact {float(want)!r}"]
            )

        return ApiCase(
            g,
            f"poisson_binomial_sf({k!r}, {q!r})",
            lambda _f: T.poisson_binomial_sf(k, q),
            judge_p,
            must_raise=k == 1.5,
        )
    if which == "auc":
        neg = draw(st.lists(st.sampled_from((0.0, 0.5, 1.0, -3.0, 1e308)), min_size=1, max_size=6))
        pos = draw(st.lists(st.sampled_from((0.0, 0.5, 1.0, 2.0, -1e308)), min_size=1, max_size=6))
        if draw(st.integers(0, 3)) == 0:
            bad = draw(st.sampled_from(([], [float("nan")], [float("inf")], ["a"], None, [1 + 1j])))
            return ApiCase(g, f"auc({bad!r}, {pos!r})", lambda _f: T.auc(bad, pos), must_raise=True)

        def judge_a(v: Any, _f: Path) -> list[str]:
            wins = sum((p > n_) + 0.5 * (p == n_) for p in pos for n_ in neg)
            want = wins / (len(pos) * len(neg))
            return (
                []
                if math.isclose(float(v), want, abs_tol=1e-12)
                else [f"auc({neg}, {pos}) = {v!r}, exact {want}"]
            )

        return ApiCase(g, f"auc({neg!r}, {pos!r})", lambda _f: T.auc(neg, pos), judge_a)
    if which == "tpr_at_alpha":
        pv = draw(st.lists(st.sampled_from((0.0, 0.005, 0.01, 0.5, 1.0)), min_size=1, max_size=8))
        alpha = draw(st.sampled_from((0.01, 0.05, 0.0, 1.0, float("nan"))))
        bad = draw(st.sampled_from((None, [1.5], [-0.1], [float("nan")], [])))
        if bad is not None and draw(st.booleans()):
            return ApiCase(
                g, f"tpr_at_alpha({bad!r}, 0.01)", lambda _f: T.tpr_at_alpha(bad, 0.01), must_raise=True
            )

        def judge_r(v: Any, _f: Path) -> list[str]:
            k = sum(p <= alpha for p in pv)
            return [] if (v.k, v.n) == (k, len(pv)) else [f"tpr_at_alpha({pv}, {alpha}) counted {v.k}/{v.n}"]

        return ApiCase(
            g,
            f"tpr_at_alpha({pv!r}, {alpha!r})",
            lambda _f: T.tpr_at_alpha(pv, alpha),
            judge_r,
            must_raise=not 0 < alpha < 1,
        )
    n = draw(st.sampled_from((0, 4, 100, 10**6)))
    gg = draw(st.sampled_from((0, 2, n, n // 2)))

    def judge_z(v: Any, _f: Path) -> list[str]:
        want = 0.0 if n == 0 else (gg - n / 2) / math.sqrt(n / 4)
        return (
            []
            if math.isclose(float(v), want, rel_tol=1e-12, abs_tol=1e-12)
            else [f"hard_count_z = {v!r} != {want}"]
        )

    return ApiCase(g, f"hard_count_z({gg}, {n})", lambda _f: T.hard_count_z(gg, n), judge_z)
