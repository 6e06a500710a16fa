"""``validate_proxy``: the full battery on one proxy and one data set (issue #6).

The data define a finite law over sentences: a :class:`~simulations.FiniteUniverse` (exact masses, every number
exact), an embeddings array ``[n, d]`` or a corpus of sentences (the empirical law ``1/n``: plug-in estimates with
intervals, see :mod:`proofs_checks.validate._stats`), or any source with ``sample_embeddings(key, n)`` (e.g.
:class:`~simulations.ClusterModel`; ``n_samples`` draws, then empirical). On that law the battery computes the
exact laws of :mod:`pmark_theory` for the schemes built on the proxy and confirms each by simulating the scheme
with the shared rules:

* continuous proxies (``b`` channels): sign balance ``p_j``, pattern masses ``π``, channel dependence, offline
  ``TV_N`` (``offline_tv``, X2/C15/C16), the online preconditions (``N % 2**b``, E6; exact balance of the rank
  split on this proxy's candidate sets, C9/C10, E5; determinism and row-independence of ``F``), flip rates
  against ``η`` beside the C11 band bound, ``ε_rm``, SNR and power at ``T`` sentences (C14, X3);
* cells: masses ``q``, ``semstamp_factor`` and TV (C7/C8, X1);
* interval rules: ``μ(G)`` and ``TV = 1 − μ(G)`` (E20).

On a corpus (sentences and their encoder) it also runs the text checks of :mod:`proofs_checks.validate._text`:
word deletion against the geometry's prediction for the measured ``η``, and correlation with sentence length.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from pmark_theory._validate import PMarkValueError, check_finite, check_size, check_unit_interval
from proofs_checks.validate._flags import FlagContext, derive_flags
from proofs_checks.validate._proxies import Proxy, ProxyError, check_proxy, evaluate_proxy, make_proxy
from proofs_checks.validate._results import ProxyValidation
from proofs_checks.validate._sections import _Data, cells_section, continuous_section, interval_section
from proofs_checks.validate._text import (
    DEFAULT_DELETION_RATES,
    DEFAULT_TEXT_SENTENCES,
    check_deletion_rates,
    length_bias,
    text_robustness,
)
from simulations._universe import FiniteUniverse

__all__ = [
    "DEFAULT_ETAS",
    "DEFAULT_N_CANDIDATES",
    "DEFAULT_T",
    "MAX_DEFAULT_N",
    "SIZE_LIMITS",
    "default_candidates",
    "validate_proxy",
]

#: Candidate counts ``N`` run when none are given: multiples of ``2**b`` for every ``b <= 6`` (online PMark needs
#: ``N % 2**b == 0``, E6), so a default run of the built-in proxy (``b = 4``) has no inadmissible ``N`` (issue 38).
DEFAULT_N_CANDIDATES = (16, 32, 64)
#: Largest ``N = 2**b`` a default run falls back to when no default ``N`` is admissible (``b = 7, 8``); above it
#: the default stays :data:`DEFAULT_N_CANDIDATES` and ``no_admissible_N`` asks for ``N`` (memory: the online
#: balance check enumerates ``2**b`` key bit vectors over ``N`` candidates).
MAX_DEFAULT_N = 256
DEFAULT_ETAS = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2)
DEFAULT_T = (1, 2, 4, 8, 16, 32, 64)
#: Rows with ``| |x| − 1 | > UNIT_ATOL`` are rescaled to unit norm (attacks and cosines need unit embeddings).
UNIT_ATOL = 1e-9
#: Rows per proxy call when tabulating the data.
EVAL_BATCH = 4096
#: Rows used by the determinism / row-independence checks.
CHECK_ROWS = 64
#: Largest accepted value of each size argument: the battery holds arrays of these sizes in memory (the
#: simulations run ``n_trials`` outputs in one batch), so larger values would exhaust memory, not just time.
SIZE_LIMITS = {
    "n_candidates": 2**16,
    "T": 10**6,
    "n_trials": 2**20,
    "n_attack": 2**20,
    "n_bootstrap": 10**5,
    "n_samples": 2**20,
    "n_balance_sets": 2**16,
    "n_text": 2**16,
}
#: ``fold_in`` tag of the text checks' key (a separate stream: the other sections' draws do not change).
TEXT_STREAM = 28


def default_candidates(kind: str, b: int) -> list[int]:
    """The ``N`` values of a run that names none, for a proxy of ``kind`` with ``b`` channels.

    The multiples of ``2**b`` in :data:`DEFAULT_N_CANDIDATES` for a continuous proxy (so that the default never
    raises ``inadmissible_N``), ``[2**b]`` when there is none and ``2**b <= MAX_DEFAULT_N``; otherwise (and for
    cells and interval proxies, which have no admissibility rule) :data:`DEFAULT_N_CANDIDATES`.
    """
    ns = list(DEFAULT_N_CANDIDATES)
    if kind != "continuous":
        return ns
    admissible = [n for n in ns if n % 2**b == 0]
    if admissible:
        return admissible
    return [2**b] if 2**b <= MAX_DEFAULT_N else ns


# --------------------------------------------------------------------------------------------------------------
# Inputs.
# --------------------------------------------------------------------------------------------------------------
def _unit_rows(name: str, x: np.ndarray) -> tuple[np.ndarray, bool]:
    norms = np.linalg.norm(x, axis=1)
    if np.any(norms == 0):
        raise PMarkValueError(f"{name} has {int(np.sum(norms == 0))} zero row(s): they cannot be normalised")
    if np.max(np.abs(norms - 1.0)) <= UNIT_ATOL:
        return x, False
    return x / norms[:, None], True


def _prepare_data(data: Any, encoder: Any, key: jax.Array, n_samples: int) -> _Data:
    if isinstance(data, FiniteUniverse):
        p = check_finite("data.probs", data.probs, ndim=1)
        if np.any(p < 0) or abs(p.sum() - 1.0) > 1e-9:
            raise PMarkValueError("data.probs must be a probability vector (non-negative, summing to 1)")
        e = check_finite("data.embeddings", data.embeddings, ndim=2)
        if e.shape[0] != p.shape[0]:
            raise PMarkValueError(f"data.embeddings must have {p.shape[0]} rows (len(probs)), got {e.shape}")
        e, norm = _unit_rows("data.embeddings", e)
        return _Data(p, e, None, "universe", norm)
    if isinstance(data, (list, tuple)) and all(isinstance(t, str) for t in data):
        if len(data) == 0:
            raise PMarkValueError("data (corpus) is empty: there are no sentences to embed")
        if encoder is None or not callable(getattr(encoder, "encode", None)):
            raise PMarkValueError(
                "data is a list of sentences: pass encoder= (an object with .encode(texts) -> [n, d])"
            )
        try:
            emb = encoder.encode(list(data))
        except Exception as exc:
            raise ProxyError(f"encoder {type(encoder).__name__} raised {type(exc).__name__}: {exc}") from exc
        x = check_finite("encoder output (embeddings)", emb, ndim=2)
        if x.shape[0] != len(data):
            raise ProxyError(f"encoder returned {x.shape[0]} embeddings for {len(data)} sentences")
        kind = "corpus"
    elif hasattr(data, "sample_embeddings") and hasattr(data, "d"):
        x = check_finite("data.sample_embeddings(...)", data.sample_embeddings(key, n_samples), ndim=2)
        kind = "source"
    else:
        if isinstance(data, (list, tuple)) and len(data) == 0:
            raise PMarkValueError("data is empty: pass a FiniteUniverse, embeddings [n, d] or sentences")
        x = check_finite("data (embeddings [n, d])", data, ndim=2)
        kind = "embeddings"
    if x.shape[1] < 1:
        raise PMarkValueError(f"data embeddings must have d >= 1 columns, got shape {x.shape}")
    x, norm = _unit_rows("data embeddings", x)
    n = x.shape[0]
    return _Data(np.full(n, 1.0 / n), x, n, kind, norm)


def _as_key(key: Any) -> jax.Array:
    """A typed ``jax.random`` key from ``None`` (seed 0), an int seed, a typed key or a raw ``uint32[2]`` key."""
    if key is None:
        return jax.random.key(0)
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        return jax.random.key(int(key))
    if isinstance(key, jax.Array) and jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        return key
    try:
        return jax.random.wrap_key_data(jax.numpy.asarray(key, dtype=jax.numpy.uint32))
    except Exception:
        raise PMarkValueError(f"key must be a jax.random key or an int seed, got {key!r}") from None


def _settings(n_candidates: Any, etas: Any, T: Any) -> tuple[list[int], np.ndarray, np.ndarray]:
    ns = [n_candidates] if isinstance(n_candidates, (int, np.integer)) else list(n_candidates)
    if not ns:
        raise PMarkValueError("n_candidates must name at least one N")
    ns = sorted({check_size("n_candidates", n, maximum=SIZE_LIMITS["n_candidates"]) for n in ns})
    e = check_finite("etas", etas, ndim=1)
    if np.any((e < 0) | (e > 2)):
        raise PMarkValueError(f"etas (cosine-distance budgets) must lie in [0, 2], got {e.tolist()}")
    ts = [T] if isinstance(T, (int, np.integer)) else list(T)
    if not ts:
        raise PMarkValueError("T must name at least one text length")
    ts = np.array(sorted({check_size("T", t, maximum=SIZE_LIMITS["T"]) for t in ts}))
    return ns, e, ts


def _tabulate(proxy: Proxy, x: np.ndarray) -> np.ndarray:
    return np.concatenate(
        [evaluate_proxy(proxy, x[s : s + EVAL_BATCH]) for s in range(0, x.shape[0], EVAL_BATCH)]
    )


def _function_checks(
    proxy: Proxy, x: np.ndarray, table: np.ndarray, rng: np.random.Generator
) -> dict[str, Any]:
    """Determinism and row-independence of ``F`` on a few rows (exact for cells, 1e-9 relative otherwise)."""
    sub = x[:CHECK_ROWS]
    f1, f2 = evaluate_proxy(proxy, sub), evaluate_proxy(proxy, sub)
    perm = rng.permutation(sub.shape[0])
    f_perm = evaluate_proxy(proxy, sub[perm])
    f_one = evaluate_proxy(proxy, sub[:1])
    ref = table[: sub.shape[0]]
    scale = 0.0 if proxy.kind == "cells" else 1e-9 * (1.0 + float(np.max(np.abs(ref))))
    rep = float(np.max(np.abs(f1 - f2)))
    batch = max(
        float(np.max(np.abs(ref - f1))),
        float(np.max(np.abs(f_perm - f1[perm]))),
        float(np.max(np.abs(f_one - f1[:1]))),
    )
    return {
        "deterministic": rep <= scale,
        "max_repeat_diff": rep,
        "batch_invariant": batch <= max(scale, 10.0 * rep),  # a noisy proxy is judged against its own noise
        "max_batch_diff": batch,
    }


def _text_section(key, proxy, sentences, data_, table, sec, encoder, opts) -> dict[str, Any]:
    """Word deletion and length bias on the corpus (issue 28; :mod:`proofs_checks.validate._text`)."""
    continuous = proxy.kind == "continuous"
    out: dict[str, Any] = {
        "text_robustness": text_robustness(
            key,
            proxy,
            sentences,
            data_.embeddings,
            encoder,
            rates=opts["deletion_rates"],
            n_text=opts["n_text"],
            thresholds=sec["medians"] if continuous else None,
            lipschitz=sec["robustness"].lipschitz if continuous else None,
            confidence=opts["confidence"],
        )
    }
    if proxy.kind != "cells":  # real-valued scores (cells are labels: no correlation is defined)
        out["length_bias"] = length_bias(
            table if continuous else table[:, None], sentences, opts["confidence"]
        )
    return out


# --------------------------------------------------------------------------------------------------------------
# The battery.
# --------------------------------------------------------------------------------------------------------------
def validate_proxy(
    proxy: Proxy | Any,
    data: Any,
    *,
    key: jax.Array | None = None,
    n_candidates: int | Sequence[int] | None = None,
    etas: Sequence[float] = DEFAULT_ETAS,
    T: int | Sequence[int] = DEFAULT_T,
    encoder: Any = None,
    alpha: float = 0.01,
    confidence: float = 0.95,
    green_fraction: float = 0.25,
    tv_tolerance: float = 0.01,
    balance_tolerance: float = 0.05,
    n_trials: int = 8192,
    n_attack: int = 1024,
    n_bootstrap: int = 200,
    n_samples: int = 4000,
    n_balance_sets: int = 32,
    deletion_rates: Sequence[float] = DEFAULT_DELETION_RATES,
    n_text: int = DEFAULT_TEXT_SENTENCES,
) -> ProxyValidation:
    """Run the full battery on a proxy: distortion (exact TV), robustness, evidence and detector power.

    Args:
      proxy: a :class:`~proofs_checks.validate.Proxy`, or a bare callable ``embeddings [n, d] -> [n, b]``
        (a continuous proxy).
      data: a :class:`~simulations.FiniteUniverse` (exact masses: every law exact), an embeddings array
        ``[n, d]`` (empirical law ``1/n``), a list of sentences (embedded with ``encoder``), or a source with
        ``d`` and ``sample_embeddings(key, n)`` (``n_samples`` draws). Rows are rescaled to unit norm.
      key: ``jax.random`` key or int seed (default ``jax.random.key(0)``: the run is deterministic).
      n_candidates: the ``N`` values; offline ``TV_N`` for each and ``N = ∞``; online needs ``N % 2**b == 0``
        (E6) and runs at the largest admissible ``N``; SemStamp/SimMark batches use the smallest. ``None``
        (default): :func:`default_candidates` for the proxy's ``b``, all admissible for ``b <= 8``.
      etas: attack budgets ``η ∈ [0, 2]`` (cosine distance).
      T: text lengths (sentences) for power and SNR.
      encoder: object with ``.encode(texts) -> [n, d]`` (needed when ``data`` is sentences).
      alpha: level of the exact one-sided hard-count test (X3).
      confidence: level of all intervals.
      green_fraction: SemStamp's ``γ``; ``g = round(γM)`` clipped to ``1..M−1``.
      tv_tolerance: a TV above it (and, for empirical data, above the zero-distortion reference) is flagged.
      balance_tolerance: ``|p_j − ½|`` above it (with an interval excluding ½) is flagged.
      n_trials: simulated outputs per scheme (confirmations, and the online evidence); rounded up to 1024 for
        PMark; ``0`` skips the SemStamp/SimMark simulations.
      n_attack: sentences attacked at every budget.
      n_bootstrap: bootstrap (and reference) draws for empirical TVs.
      n_samples: draws from a ``sample_embeddings`` source.
      n_balance_sets: candidate sets enumerated over all key bits in the online balance check.
      deletion_rates: word-deletion probabilities in ``(0, 1)`` of the text checks (corpus data only).
      n_text: corpus sentences attacked by word deletion (a fixed random subset when the corpus is larger).

    Every size argument is bounded by :data:`SIZE_LIMITS` (memory), e.g. ``n_trials <= 2**20``.

    Returns:
      :class:`~proofs_checks.validate.ProxyValidation` (its ``flags`` say what is wrong and why).

    Raises:
      PMarkValueError: bad settings or data (empty corpus, NaN, wrong shapes, zero rows), or a size argument
        above :data:`SIZE_LIMITS`.
      ProxyError: the proxy (or the encoder) raised, returned NaN/inf or a wrong shape; the message names it.
    """
    if not isinstance(proxy, Proxy):
        if not callable(proxy):
            raise PMarkValueError(f"proxy must be a Proxy or a callable, got {type(proxy).__name__}")
        proxy = make_proxy(proxy)
    proxy = check_proxy(proxy)
    key = _as_key(key)
    ns, etas_arr, ts = _settings(DEFAULT_N_CANDIDATES if n_candidates is None else n_candidates, etas, T)
    opts = {
        "alpha": check_unit_interval("alpha", alpha, open_left=True, open_right=True),
        "confidence": check_unit_interval("confidence", confidence, open_left=True, open_right=True),
        "green_fraction": check_unit_interval(
            "green_fraction", green_fraction, open_left=True, open_right=True
        ),
        "tv_tolerance": check_unit_interval("tv_tolerance", tv_tolerance),
        "balance_tolerance": check_unit_interval("balance_tolerance", balance_tolerance),
        "n_trials": check_size("n_trials", n_trials, minimum=0, maximum=SIZE_LIMITS["n_trials"]),
        "n_attack": check_size("n_attack", n_attack, maximum=SIZE_LIMITS["n_attack"]),
        "n_bootstrap": check_size("n_bootstrap", n_bootstrap, maximum=SIZE_LIMITS["n_bootstrap"]),
        "n_samples": check_size("n_samples", n_samples, minimum=2, maximum=SIZE_LIMITS["n_samples"]),
        "n_balance_sets": check_size("n_balance_sets", n_balance_sets, maximum=SIZE_LIMITS["n_balance_sets"]),
        "deletion_rates": check_deletion_rates(deletion_rates),
        "n_text": check_size("n_text", n_text, maximum=SIZE_LIMITS["n_text"]),
    }
    k_data, k_rng, k_run = jax.random.split(key, 3)
    data_ = _prepare_data(data, encoder, k_data, opts["n_samples"])
    rng = np.random.default_rng(np.asarray(jax.random.key_data(k_rng)).ravel().astype(np.uint64).tolist())
    table = _tabulate(proxy, data_.embeddings)
    if n_candidates is None:
        ns = default_candidates(proxy.kind, table.shape[1] if table.ndim == 2 else 1)
    checks = _function_checks(proxy, data_.embeddings, table, rng)
    if proxy.kind == "continuous":
        opts["n_trials"] = max(opts["n_trials"], 1)
        sec = continuous_section(k_run, rng, proxy, data_, table, ns, etas_arr, ts, opts)
    elif proxy.kind == "cells":
        sec = cells_section(k_run, rng, proxy, data_, table, ns, etas_arr, opts)
    else:
        sec = interval_section(k_run, rng, proxy, data_, table, ns, etas_arr, opts)
    sec["function_checks"] = checks
    if data_.kind == "corpus":
        sec.update(
            _text_section(
                jax.random.fold_in(key, TEXT_STREAM), proxy, list(data), data_, table, sec, encoder, opts
            )
        )
    ctx = FlagContext(proxy, data_.n_obs, table, sec, checks, opts)
    flags, verdicts = derive_flags(ctx)
    meta = {
        "kind": data_.kind,
        "n_sentences": int(data_.probs.size),
        "d": int(data_.embeddings.shape[1]),
        "exact": data_.n_obs is None,
        "normalised": data_.normalised,
        "text_checks": data_.kind == "corpus",
    }
    settings = {
        **opts,
        "n_candidates": ns,
        "etas": etas_arr,
        "T": ts,
        "n_cells": proxy.n_cells,
        "interval": proxy.interval,
    }
    fields = {k: v for k, v in sec.items() if k in ProxyValidation._fields and k != "confirmations"}
    return ProxyValidation(
        name=proxy.name,
        kind=proxy.kind,
        data=meta,
        settings=settings,
        **fields,
        confirmations=tuple(sec["confirmations"]),
        flags=tuple(flags),
        distortion_free=verdicts,
    )
