"""The Monte Carlo engine: ``jit(vmap(step))`` over trials, chunked, sharded over devices (docs/architecture.md, heavy work).

Trial ``i`` always runs with the key ``jax.random.fold_in(key, i)``, whatever the chunk size or the number of
devices, so a run is reproducible bit for bit across 1 CPU, 8 emulated devices or an accelerator pod: the
histogram of outcomes (integer counts, summed with ``psum``) is identical, and per-trial outputs are identical
values gathered in trial order.

Each chunk is split evenly over a 1-D device mesh (axis ``"trials"``) with :func:`jax.shard_map`; every device
folds in its own trial indices, runs the vmapped step and, for counts, builds a local histogram that is summed
across devices. Memory is ``O(chunk_size × per-trial memory + n_outcomes)`` for any ``n_trials``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType
from jax.sharding import PartitionSpec as P

from pmark_theory._validate import PMarkValueError, check_jax_key, check_positive_int

__all__ = ["DEFAULT_CHUNK_SIZE", "REDUCTIONS", "TrialResults", "run_trials"]

Array = jax.Array
#: Trials per chunk (per call of the compiled kernel) unless told otherwise.
DEFAULT_CHUNK_SIZE = 2**14
#: ``counts``: histogram of integer outcomes; ``mean``: mean and standard error of every output leaf;
#: ``stack``: all outputs, ``[n_trials, ...]`` per leaf.
REDUCTIONS = ("counts", "mean", "stack")
_AXIS = "trials"
_GRANULE = 128  # chunks are multiples of this (and of the device count): same chunking on 1..128 devices
_MAX_TRIALS = 2**32 - 1  # fold_in takes 32-bit data


class TrialResults(NamedTuple):
    """What :func:`run_trials` returns; fields not produced by the chosen reduction are ``None``.

    Attributes:
      n_trials: number of trials run.
      counts: ``reduce="counts"``: int64 ``[n_outcomes]``, how often each outcome was returned.
      n_out_of_range: ``reduce="counts"``: trials whose outcome was outside ``0..n_outcomes-1`` (e.g. ``-1``
        for an exhausted retry budget).
      mean: ``reduce="mean"``: per-leaf float64 means over trials (same pytree as the step output).
      se: ``reduce="mean"``: per-leaf standard errors ``s / √n`` (``s`` the sample standard deviation).
      outputs: ``reduce="stack"``: per-leaf NumPy arrays ``[n_trials, ...]`` in trial order.
    """

    n_trials: int
    counts: np.ndarray | None = None
    n_out_of_range: int | None = None
    mean: Any = None
    se: Any = None
    outputs: Any = None


def _resolve_devices(devices: Any) -> tuple[Any, ...]:
    all_devices = jax.devices()
    if devices is None:
        return tuple(all_devices)
    if isinstance(devices, (int, np.integer)) and not isinstance(devices, bool):
        n = check_positive_int("devices", devices)
        if n > len(all_devices):
            raise PMarkValueError(f"devices = {n} but only {len(all_devices)} device(s) are available")
        return tuple(all_devices[:n])
    if isinstance(devices, Sequence) and len(devices) > 0:
        return tuple(devices)
    raise PMarkValueError(
        f"devices must be None, a positive int or a non-empty sequence of devices, got {devices!r}"
    )


def _resolve_compiler_options(compiler_options: Any) -> tuple[tuple[str, Any], ...]:
    if compiler_options is None:
        return ()
    if not isinstance(compiler_options, Mapping) or not all(isinstance(k, str) for k in compiler_options):
        raise PMarkValueError(
            f"compiler_options must be None or a mapping from XLA option names to values, got {compiler_options!r}"
        )
    return tuple(sorted(compiler_options.items()))


@functools.lru_cache(maxsize=32)
def _kernel(
    step_fn: Callable,
    chunk: int,
    n_outcomes: int | None,
    devices: tuple[Any, ...],
    compiler_options: tuple[tuple[str, Any], ...] = (),
):
    """Compiled ``(key, offset, n_trials) -> chunk result`` for one step function, chunk, device set and set of
    XLA options (``compiler_options``: sorted ``(name, value)`` pairs, hashable for the cache).

    ``n_outcomes=None``: per-trial outputs (``"mean"`` and ``"stack"`` share this kernel); else a histogram.
    """
    n_dev = len(devices)
    local = chunk // n_dev
    mesh = jax.make_mesh((n_dev,), (_AXIS,), axis_types=(AxisType.Auto,), devices=devices)

    def per_device(key, offset, n_trials):
        start = offset + jax.lax.axis_index(_AXIS).astype(jnp.int64) * local
        idx = start + jnp.arange(local, dtype=jnp.int64)
        keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(idx)
        out = jax.vmap(step_fn)(keys)
        if n_outcomes is None:
            return out
        valid = idx < n_trials
        ids = jnp.asarray(out).astype(jnp.int64)
        if ids.shape != (local,):
            raise PMarkValueError(
                f"reduce='counts' needs step_fn(key) to return a scalar id, got {ids.shape[1:]}"
            )
        in_range = valid & (ids >= 0) & (ids < n_outcomes)
        counts = (
            jnp.zeros(n_outcomes, jnp.int64).at[jnp.where(in_range, ids, 0)].add(in_range.astype(jnp.int64))
        )
        oor = jnp.sum(valid & ~in_range, dtype=jnp.int64)
        return jax.lax.psum(counts, _AXIS), jax.lax.psum(oor, _AXIS)

    out_specs = P(_AXIS) if n_outcomes is None else (P(), P())
    # check_vma=False: user steps may hold while_loops whose initial carry is a constant (not "varying").
    fn = jax.shard_map(per_device, mesh=mesh, in_specs=(P(), P(), P()), out_specs=out_specs, check_vma=False)
    return jax.jit(fn, compiler_options=dict(compiler_options) if compiler_options else None)


def run_trials(
    key: Array,
    step_fn: Callable[[Array], Any],
    n_trials: int,
    *,
    n_outcomes: int | None = None,
    reduce: str | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    progress: Callable[[int, int], Any] | None = None,
    devices: Any = None,
    compiler_options: Mapping[str, Any] | None = None,
    allow_out_of_range: bool = False,
) -> TrialResults:
    """Run ``step_fn`` on ``n_trials`` independent keys, ``jit(vmap(...))`` per chunk, sharded over devices.

    Trial ``i`` uses ``jax.random.fold_in(key, i)``: results do not depend on ``chunk_size`` or ``devices``
    (counts and stacked outputs are bit-identical; means are identical as long as the chunking is, which holds
    for any device count up to 128 dividing 128).

    Args:
      key: JAX key (``jax.random.key(seed)`` or a raw ``PRNGKey``).
      step_fn: pure, vmappable ``step(key) -> outputs`` (a scalar int id for ``reduce="counts"``). The
        compiled kernel is cached per ``step_fn`` object: reuse the same function to skip recompilation.
      n_trials: number of trials, ``1 <= n_trials < 2**32``.
      n_outcomes: number of outcomes ``0..n_outcomes-1`` of a counting run (required for ``"counts"``).
      reduce: ``"counts"`` (default when ``n_outcomes`` is given), ``"mean"`` or ``"stack"`` (default
        otherwise); see :data:`REDUCTIONS`.
      chunk_size: trials per compiled call (rounded up to a multiple of 128 and of the device count; capped at
        ``n_trials`` rounded likewise). Bounds memory.
      progress: optional callback ``progress(done, total)`` after each chunk.
      devices: ``None`` (all devices), a number of devices (the first ones), or a sequence of devices.
      compiler_options: XLA options for compiling the kernel (``jax.jit(..., compiler_options=...)``), e.g.
        ``{"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}`` — what the global
        ``jax_disable_most_optimizations`` flag sets, scoped to this run: faster compilation, slower execution,
        for small runs. Integer outcomes (keys, draws, counts) are unaffected; floats may differ in the last
        bits. ``None``: JAX's defaults.
      allow_out_of_range: ``reduce="counts"`` only: accept outcomes outside ``0..n_outcomes-1`` (counted in
        ``n_out_of_range``, left out of ``counts``). By default they raise: a histogram that silently drops
        trials would pass a goodness-of-fit test it should fail.

    Returns:
      :class:`TrialResults`.

    Raises:
      PMarkValueError: ``n_trials`` or ``chunk_size`` not a positive integer, too many trials, unknown
        ``reduce``, ``"counts"`` without ``n_outcomes`` or with a non-scalar step output, bad ``devices``,
        ``compiler_options`` not a mapping with string keys, out-of-range outcomes without ``allow_out_of_range``.
    """
    check_jax_key("key", key)
    n_trials = check_positive_int("n_trials", n_trials)
    if n_trials > _MAX_TRIALS:
        raise PMarkValueError(
            f"n_trials must be < 2**32 (fold_in takes 32-bit trial indices), got {n_trials}"
        )
    chunk_size = check_positive_int("chunk_size", chunk_size)
    if reduce is None:
        reduce = "counts" if n_outcomes is not None else "stack"
    if reduce not in REDUCTIONS:
        raise PMarkValueError(f"reduce must be one of {REDUCTIONS}, got {reduce!r}")
    if reduce == "counts":
        if n_outcomes is None:
            raise PMarkValueError("reduce='counts' needs n_outcomes (number of possible outcomes)")
        n_outcomes = check_positive_int("n_outcomes", n_outcomes)
    else:
        n_outcomes = None
    devs = _resolve_devices(devices)
    granule = math.lcm(_GRANULE, len(devs))
    chunk = -(-min(chunk_size, n_trials) // granule) * granule
    kernel = _kernel(step_fn, chunk, n_outcomes, devs, _resolve_compiler_options(compiler_options))

    counts, oor, sums, sumsq, stacked = None, 0, None, None, []
    done = 0
    for offset in range(0, n_trials, chunk):
        res = kernel(key, jnp.int64(offset), jnp.int64(n_trials))
        n_valid = min(chunk, n_trials - offset)
        if reduce == "counts":
            c, o = res
            counts = np.asarray(c) if counts is None else counts + np.asarray(c)
            oor += int(o)
        else:
            host = jax.tree_util.tree_map(lambda a, k=n_valid: np.asarray(a)[:k], res)
            if reduce == "stack":
                stacked.append(host)
            else:
                s = jax.tree_util.tree_map(lambda a: np.sum(a, axis=0, dtype=np.float64), host)
                s2 = jax.tree_util.tree_map(lambda a: np.sum(np.square(a, dtype=np.float64), axis=0), host)
                sums = s if sums is None else jax.tree_util.tree_map(np.add, sums, s)
                sumsq = s2 if sumsq is None else jax.tree_util.tree_map(np.add, sumsq, s2)
        done += n_valid
        if progress is not None:
            progress(done, n_trials)

    if reduce == "counts":
        if oor and not allow_out_of_range:
            raise PMarkValueError(
                f"{oor} of {n_trials} trials returned an outcome outside 0..{n_outcomes - 1} (n_outcomes = "
                f"{n_outcomes}): a histogram without them would be silently wrong; pass the right n_outcomes, or "
                "allow_out_of_range=True when an out-of-range id deliberately marks 'no output'"
            )
        return TrialResults(n_trials, counts=counts, n_out_of_range=oor)
    if reduce == "stack":
        outputs = jax.tree_util.tree_map(lambda *xs: np.concatenate(xs, axis=0), *stacked)
        return TrialResults(n_trials, outputs=outputs)
    mean = jax.tree_util.tree_map(lambda s: s / n_trials, sums)

    def _se(s, s2):
        if n_trials < 2:
            return np.full_like(s, np.nan)
        var = np.maximum(s2 - s * s / n_trials, 0.0) / (n_trials - 1)
        return np.sqrt(var / n_trials)

    return TrialResults(n_trials, mean=mean, se=jax.tree_util.tree_map(_se, sums, sumsq))
