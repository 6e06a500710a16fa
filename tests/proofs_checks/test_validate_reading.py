"""validate-proxy reads as it should (issue 38): its defaults raise none of its own flags, exact values carry no
zero-width interval, and a power that is 0 by construction says why.

All on synthetic inputs (the flags function on a hand-built context, the renderer on a hand-built result): no
battery run.
"""

from __future__ import annotations

import numpy as np
import pytest

from proofs_checks.validate._battery import DEFAULT_N_CANDIDATES, MAX_DEFAULT_N, default_candidates
from proofs_checks.validate._evidence import first_attainable_T, power_unattainable, smallest_p_text
from proofs_checks.validate._flags import FlagContext, derive_flags
from proofs_checks.validate._proxies import make_proxy
from proofs_checks.validate._report import UNATTAINABLE_MARK, render_markdown, structural_zero_note
from proofs_checks.validate._sections import online_admissibility
from proofs_checks.validate._stats import Estimate
from proofs_checks.validate.cli import _parser

OPTS = {"tv_tolerance": 0.01, "balance_tolerance": 0.05}
CHECKS = {"batch_invariant": True, "deterministic": True, "max_batch_diff": 0.0, "max_repeat_diff": 0.0}


def _flags(b: int, ns: list[int], balance: list[Estimate] | None = None):
    """Flags of a clean continuous proxy with ``b`` channels run at ``ns`` (balanced, independent, exact)."""
    sec = {
        "channels": b,
        "confirmations": [],
        "sign_balance": balance or [Estimate.exact(0.5)] * b,
        "medians": np.zeros(b),
        "offline_tv": {"inf": Estimate.exact(0.0)},
        "online": {**online_admissibility(ns, b), "balance": None},
    }
    table = np.tile(np.linspace(-1, 1, 8)[:, None], (1, b))
    proxy = make_proxy(lambda x: x[:, :b], name="synthetic")
    return derive_flags(FlagContext(proxy, None, table, sec, CHECKS, OPTS))[0]


def test_the_default_n_raises_none_of_the_batterys_own_flags():
    # The CLI defers to the battery's default, which is derived from b.
    assert _parser().parse_args(["builtin:pmark", "--synthetic"]).candidates is None
    # b = 4 is the built-in proxy's default: every default N is admissible and no flag is raised.
    assert default_candidates("continuous", 4) == list(DEFAULT_N_CANDIDATES)
    assert _flags(4, default_candidates("continuous", 4)) == []
    for b in range(1, 9):  # up to MAX_DEFAULT_N = 2**8
        ns = default_candidates("continuous", b)
        assert ns and all(n % 2**b == 0 for n in ns), (b, ns)
        assert _flags(b, ns) == [], b
    assert default_candidates("continuous", 9) == list(DEFAULT_N_CANDIDATES) and 2**9 > MAX_DEFAULT_N
    assert default_candidates("cells", 4) == list(DEFAULT_N_CANDIDATES)
    # Control: the old default (8, 16, 64) at b = 4 trips the info flag this replaces.
    assert [f.code for f in _flags(4, [8, 16, 64])] == ["inadmissible_N"]


def test_exact_values_are_printed_without_an_interval():
    exact = [Estimate.exact(0.435), Estimate.exact(0.5)]
    (flag,) = _flags(2, [16], exact)
    assert flag.code == "unbalanced" and "p = P(F > 0) = 0.435 (exact) is far" in flag.message
    assert "[0.435" not in flag.message
    # A plug-in estimate keeps its interval.
    cp = [Estimate(0.435, 0.40, 0.47, "clopper-pearson"), Estimate.exact(0.5)]
    (flag,) = _flags(2, [16], cp)
    assert "0.435 [0.400, 0.470]" in flag.message
    md = render_markdown(
        _result(sign_balance=[e._asdict() for e in (exact[0], cp[0])], flags=[flag._asdict()]), {}
    )
    assert "| 1 | 0.4350 (exact) |" in md and "| 2 | 0.4350 [0.4000, 0.4700] |" in md
    assert "[0.4350, 0.4350]" not in md


@pytest.mark.parametrize(
    ("b", "T", "alpha", "zero", "first"),
    [(4, 1, 0.01, True, 2), (4, 2, 0.01, False, 2), (2, 3, 0.01, True, 4), (1, 1, 0.5, False, 1)],
)
def test_unattainable_power_is_computed_from_the_configuration(b, T, alpha, zero, first):
    assert power_unattainable(b, T, alpha) is zero  # 2**-(bT) > α; equality (b = T = 1, α = ½) can reject
    assert first_attainable_T(b, alpha) == first


def test_a_structural_zero_is_explained_next_to_the_number():
    assert smallest_p_text(4) == "1/16" and smallest_p_text(40) == "2^-40"
    note = structural_zero_note(4, [1, 2, 4], 0.01)
    assert "T = 1: the smallest p-value with bT = 4 bits is 1/16 > α = 0.01" in note
    assert "T = 2 (bT = 8 bits, smallest p-value 1/256 <= α)" in note
    assert structural_zero_note(4, [2, 4], 0.01) is None
    b2 = structural_zero_note(2, [1, 2, 3, 4], 0.01)  # b = 2: T = 1..3 unattainable (1/64 > 0.01)
    assert "bT = 6 bits is 1/64" in b2 and "bT = 8 bits is" not in b2
    ev = {
        "n_candidates": 16,
        "alpha": 0.01,
        "T": [1, 2],
        "eps_clean": Estimate(0.1, 0.09, 0.11, "normal")._asdict(),
        "eps_clean_channel": [0.1] * 4,
        "etas": [0.1],
        "eps": {k: [Estimate(0.2, 0.19, 0.21, "normal")._asdict()] for k in ("adversarial", "random")},
        "power_sim": {"none": [[0.0, 0.476]], "adversarial": [[0.0, 0.02]], "random": [[0.0, 0.4]]},
    }
    md = render_markdown(_result(evidence=ev), {})
    assert f"| none | 0 | 0.1000 [0.0900, 0.1100] | {UNATTAINABLE_MARK} | 0.476 |" in md
    assert "bT = 4 bits is 1/16 > α = 0.01" in md
    # Control: at α = 0.1 (1/16 <= α) T = 1 can reject, so its 0 is a measurement, not marked.
    md = render_markdown(_result(evidence={**ev, "alpha": 0.1}), {})
    assert "unattainable" not in md and "| none | 0 | 0.1000 [0.0900, 0.1100] | 0.000 | 0.476 |" in md


def _result(**fields):
    return {
        "name": "synthetic",
        "kind": "continuous",
        "data": {"kind": "universe", "n_sentences": 8, "d": 2, "exact": True, "normalised": False},
        "settings": {"confidence": 0.95, "tv_tolerance": 0.01, "n_candidates": [16]},
        "medians": [0.0, 0.0],
        **fields,
    }
