"""Mutation guards of the context-seed detection checks Z3 and Z4 (assembled in :mod:`proofs_checks.mutations`)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from pmark_theory import _seed_resampling as _sres
from pmark_theory import _seeds as _sds
from proofs_checks._mutation_types import Mutation
from simulations import _seed_robustness as _rob

__all__ = ["MUTATIONS"]


def _resample_positional_bits(
    rng: Any, embeddings: Any, centres: Any, b: int, window: int, bits_fn: Any
) -> Any:
    """A null draw of Z3's resampler whose bits are iid fair per (t, j) (positional) instead of 1{<ζ, c_t> > 0}."""
    key = _sres.draw_context_key(rng, jnp.shape(embeddings)[-1], b)
    iid = lambda zeta, emb, w, first: jax.random.bernoulli(  # noqa: E731
        jax.random.fold_in(rng, 1), 0.5, (emb.shape[0], b)
    ).astype(jnp.int32)
    return _sres.context_seed_count(key, embeddings, window, centres, iid)


def _resample_frames_fixed(rng: Any, embeddings: Any, centres: Any, b: int, window: int, bits_fn: Any) -> Any:
    """A null draw of Z3's resampler that redraws only r_0: one (V, ζ) shared by every resample (bits held fixed)."""
    d = jnp.shape(embeddings)[-1]
    key = _sres.draw_context_key(jax.random.key(0), d, b)._replace(
        first_bits=_sres.draw_context_key(rng, d, b).first_bits
    )
    return _sres.context_seed_count(key, embeddings, window, centres, bits_fn)


def _context_bits_from_position(zeta: Any, embeddings: Any, window: int, first_bits: Any) -> Any:
    """Context seeds degraded to positional: row t is 1{<ζ, p_t> > 0} with p_t a fixed direction of the position t."""
    t_len, d = jnp.shape(embeddings)
    pos = jax.vmap(lambda t: jax.random.normal(jax.random.fold_in(jax.random.key(0), t), (d,)))(
        jnp.arange(1, t_len)
    )
    later = (pos @ jnp.asarray(zeta, dtype=jnp.float64).T > 0).astype(jnp.int32)
    return jnp.concatenate([jnp.asarray(first_bits, dtype=jnp.int32).reshape(1, -1), later], axis=0)


#: Check ID → its mutation guards.
MUTATIONS: dict[str, list[Mutation]] = {
    "Z3": [
        Mutation(
            "the key resampler draws the bits iid fair per (t, j) (positional seeds, X3's null) instead of "
            "recomputing them from the text's contexts with a fresh ζ",
            lambda mp: mp.setattr(_sres, "resample_count", _resample_positional_bits),
            "pmark_theory._seed_resampling.resample_count",
        ),
        Mutation(
            "the key resampler redraws only the first sentence's bits r_0: one (V, ζ) shared by every resample",
            lambda mp: mp.setattr(_sres, "resample_count", _resample_frames_fixed),
            "pmark_theory._seed_resampling.resample_count",
        ),
    ],
    "Z4": [
        Mutation(
            "context seeds computed from the position: c_t replaced by a fixed direction of t (positional seeds)",
            lambda mp: mp.setattr(_sds, "context_seed_bits", _context_bits_from_position),
            "pmark_theory._seeds.context_seed_bits",
        ),
        Mutation(
            "the detector recomputes context bits from the UNDELETED text's contexts (which a real detector cannot "
            "see): deletion costs nothing beyond the deleted sentences",
            lambda mp: mp.setattr(_rob, "read_kept", _rob.read_kept_undeleted),
            "simulations._seed_robustness.read_kept",
        ),
    ],
}
