"""The per-key p-value of the hard count made valid under context centring's dependence between sentences (K2).

:func:`pmark_theory._per_key_test.per_key_pvalue` treats the ``bT`` match indicators of a text as independent.
Context centring (:mod:`pmark_theory._centring`) makes them dependent: in K1's Gaussian topic model one channel's
scaled proxies have ``Cov(Y_0, Y_t) = −(1 − λ)/t`` (``Y_(t>=1)`` independent), so a key whose first bit differs
from the later ones sees an over-dispersed count. With a large reference corpus (intervals close to ½) the
independent Poisson-binomial null then rejects human text of such a key more often than α (K2 measures how
often; at ``T = 4``, ``b = 4``, λ = 0 the worst key reaches 0.0757 at α = 0.05, and 16.0% of keys exceed α; exact).

**The dependence-aware p-value** (:func:`per_key_pvalues_context`) of a count ``N`` of a text of ``T`` sentences
is the largest of

* the independent per-key p-value ``P(PB(q̄) >= N)`` (valid when the match indicators are independent with
  rates in the calibrated intervals: K1);
* for ``T <=`` :data:`MAX_EXACT_T`: the exact tail ``P_λ(N' >= N)`` of the hard count of THIS key under K1's
  context-centred model (:func:`context_count_tails`: the channels' exact orthant laws, convolved), maximised
  over λ in :data:`CONTEXT_LAMBDAS` (λ → 1 is the fair binomial); for longer texts the bound
  ``P(Bin(b(T − 1), ½) >= N − b)``, valid in that model for any λ because ``Y_1..Y_(T−1)`` are independent fair
  signs whatever ``Y_0`` does (sentence 0 counted as matching on every channel).

A maximum of p-values is valid whenever one of them is: the test has level α for this key if the text's signs are
independent with rates in the intervals, or if they follow K1's context-centred model with λ in the grid (the
tail is continuous in λ, and between grid points the bound is measured, not proved: in
``tests/pmark_theory/test_per_key_test_context.py`` no key exceeds α at λ in steps of 0.03, and a one-off run in
steps of 0.01 (``T <= 5``, ``b <= 2``, α ∈ {0.1, 0.05, 0.01}) found none either). Real text is neither model:
MiniLM's context-centred signs also correlate positively between neighbouring later sentences (0.03–0.09; K2),
which this p-value does not model; ``pmark calibrate``'s held-out FPR is the measurement that relies on neither.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from scipy import stats

from pmark_theory._context_orthants import context_channel_pmfs
from pmark_theory._per_key_test import per_key_pvalues
from pmark_theory._validate import PMarkValueError

__all__ = ["CONTEXT_LAMBDAS", "MAX_EXACT_T", "context_count_tails", "per_key_pvalues_context"]

#: The topic shares λ over which the context model's tail is maximised (λ = 1: independent fair signs).
CONTEXT_LAMBDAS: tuple[float, ...] = (*(round(0.05 * i, 2) for i in range(20)), 1.0)
#: Longest text whose exact context law is used (``2^(T−1)`` orthant integrals per λ: about 3 s for the 21 values
#: of λ at ``T = 8`` on first use, then cached per process); longer texts use the sentence-0 bound of the module
#: docstring (it costs ``b`` matches of evidence).
MAX_EXACT_T = 8


def _conv_channels(pmfs: np.ndarray) -> np.ndarray:
    out = pmfs[0]
    for row in pmfs[1:]:
        out = np.convolve(out, row)
    return out


@functools.lru_cache(maxsize=4096)
def _tails_cached(cols_key: bytes, t_len: int, b: int, lams: tuple[float, ...]) -> np.ndarray:
    cols = np.frombuffer(cols_key, dtype=np.int64).reshape(b, t_len)
    out = np.zeros((len(lams), b * t_len + 1))
    for i, lam in enumerate(lams):
        if lam >= 1.0:
            pmf = stats.binom.pmf(np.arange(b * t_len + 1), b * t_len, 0.5)
        else:
            pmf = _conv_channels(context_channel_pmfs(cols, lam))
        out[i] = np.minimum(np.cumsum(pmf[::-1])[::-1], 1.0)
    out[:, 0] = 1.0
    out.setflags(write=False)
    return out


def context_count_tails(bits: Any, lams: tuple[float, ...] = CONTEXT_LAMBDAS) -> np.ndarray:
    """``tail[i, c] = P_(λ_i)(N >= c)``: the exact tails of one key's hard count under K1's context model (K2).

    Args:
      bits: ``[T, b]`` key bits in ``{0, 1}``, ``1 <= T <=`` :data:`MAX_EXACT_T`.
      lams: topic shares in ``[0, 1]`` (1: independent fair signs).

    Returns:
      ``[len(lams), bT + 1]`` float64 (read-only).

    Raises:
      PMarkValueError: bits not ``[T, b]`` of 0/1, ``T`` outside ``1..MAX_EXACT_T``, λ outside ``[0, 1]``.
    """
    r = np.asarray(bits)
    if r.ndim != 2 or r.shape[0] < 1 or r.shape[1] < 1 or not np.all((r == 0) | (r == 1)):
        raise PMarkValueError(f"bits must be a [T, b] array of 0/1 with T, b >= 1, got shape {r.shape}")
    if r.shape[0] > MAX_EXACT_T:
        raise PMarkValueError(f"the exact context law needs T <= {MAX_EXACT_T}, got T = {r.shape[0]}")
    lam_t = tuple(float(x) for x in lams)
    if not lam_t or any(not 0.0 <= x <= 1.0 for x in lam_t):
        raise PMarkValueError(f"lams must be a non-empty sequence of values in [0, 1], got {lams!r}")
    cols = np.ascontiguousarray(r.T.astype(np.int64))
    return _tails_cached(cols.tobytes(), r.shape[0], r.shape[1], lam_t)


def _long_text_bound(n: int, t_len: int, b: int) -> float:
    """``P(Bin(b(T − 1), ½) >= N − b)``: sentence 0 counted as matching on every channel."""
    return float(stats.binom.sf(n - b - 1, b * (t_len - 1), 0.5))


def per_key_pvalues_context(
    n_matches: Any,
    n_sentences: Any,
    bits: Any,
    p_lo: Any,
    p_hi: Any,
    *,
    lams: tuple[float, ...] = CONTEXT_LAMBDAS,
) -> np.ndarray:
    """Per-key p-values of a context-centred key, valid under the sentences' dependence (K2, module docstring).

    The arguments and errors are those of :func:`pmark_theory._per_key_test.per_key_pvalues`; each p-value is
    the maximum of that independent p-value and the context model's supremum over ``lams`` (texts of at most
    :data:`MAX_EXACT_T` sentences) or the sentence-0 bound (longer texts).

    Returns:
      ``[m]`` float64 p-values (1 where ``T_i = 0``).
    """
    indep = per_key_pvalues(n_matches, n_sentences, bits, p_lo, p_hi)
    r = np.asarray(bits).astype(np.int64)
    b = r.shape[1]
    counts, lengths = np.broadcast_arrays(
        np.atleast_1d(np.asarray(n_matches)).astype(np.int64),
        np.atleast_1d(np.asarray(n_sentences)).astype(np.int64),
    )
    out = indep.copy()
    for t_len in np.unique(lengths):
        t = int(t_len)
        if t == 0:
            continue
        sel = lengths == t
        if t <= MAX_EXACT_T:
            model = context_count_tails(r[:t], lams).max(axis=0)[counts[sel]]
        else:
            model = np.array([_long_text_bound(int(n), t, b) for n in counts[sel]])
        out[sel] = np.maximum(out[sel], model)
    return out
