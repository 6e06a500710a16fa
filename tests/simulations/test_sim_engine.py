"""The Monte Carlo engine: trial keys, chunking, reductions, and EXACT agreement on 1 and 8 devices."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simulations as sim
from pmark_theory._validate import PMarkValueError

KEY = jax.random.key(7)


def _dice(key):
    """A cheap step: an id in 0..9, sometimes out of range (-1 or 10) to exercise n_out_of_range."""
    return jax.random.randint(key, (), -1, 11)


def _pair(key):
    k1, k2 = jax.random.split(key)
    return {"u": jax.random.uniform(k1, (3,)), "bit": jax.random.bernoulli(k2).astype(jnp.int32)}


def test_trial_i_uses_fold_in_key_i_and_chunking_is_invisible():
    n = 1000
    ref_ids = np.asarray(jax.vmap(lambda i: _dice(jax.random.fold_in(KEY, i)))(jnp.arange(n)))
    ref = np.bincount(ref_ids[(ref_ids >= 0) & (ref_ids < 10)], minlength=10)
    for chunk in (128, 4096):
        res = sim.run_trials(KEY, _dice, n, n_outcomes=10, chunk_size=chunk, allow_out_of_range=True)
        np.testing.assert_array_equal(res.counts, ref)
        assert res.n_out_of_range == int(np.sum((ref_ids < 0) | (ref_ids >= 10)))
        assert res.n_trials == n and res.counts.dtype == np.int64


def test_stack_and_mean_reductions_and_progress():
    n = 700
    calls = []
    stacked = sim.run_trials(KEY, _pair, n, chunk_size=256, progress=lambda d, t: calls.append((d, t)))
    assert calls == [(256, n), (512, n), (700, n)]
    ref = jax.vmap(lambda i: _pair(jax.random.fold_in(KEY, i)))(jnp.arange(n))
    np.testing.assert_array_equal(stacked.outputs["u"], np.asarray(ref["u"]))
    np.testing.assert_array_equal(stacked.outputs["bit"], np.asarray(ref["bit"]))
    mean = sim.run_trials(KEY, _pair, n, reduce="mean", chunk_size=256)
    np.testing.assert_allclose(mean.mean["u"], np.asarray(ref["u"]).mean(axis=0), rtol=1e-13)
    se = np.asarray(ref["u"]).std(axis=0, ddof=1) / np.sqrt(n)
    np.testing.assert_allclose(mean.se["u"], se, rtol=1e-10)
    assert mean.counts is None and stacked.mean is None


# The same experiment runs in a subprocess with 8 emulated CPU devices (XLA_FLAGS must be set before jax is
# imported) on all 8 devices and on 1 device; counts and stacked outputs must be bit-identical, and equal to
# the in-process (1-device) run.
_SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    import jax, numpy as np
    sys.path.insert(0, os.path.dirname(sys.argv[1]))
    import simulations as sim
    from test_sim_engine import experiment
    assert len(jax.devices()) == 8, jax.devices()
    out = {str(n): experiment(devices=n) for n in (8, 1)}
    print(json.dumps(out))
    """
)


def experiment(devices):
    """SemStamp with retries (a while_loop per trial) counted, and a pytree step stacked."""
    u = sim.make_finite_universe(jax.random.key(3), 12, 4, alpha=0.5)
    hyper = sim.random_hyperplanes(jax.random.key(4), 2, 4)
    step = sim.semstamp_step(u, hyper, 2, 3, mode="fallback", max_trials=2)
    res = sim.run_trials(jax.random.key(5), step, 3000, n_outcomes=12, chunk_size=1024, devices=devices)
    st = sim.run_trials(jax.random.key(6), _pair, 300, reduce="stack", devices=devices)
    return {"counts": res.counts.tolist(), "u": st.outputs["u"].tolist(), "bit": st.outputs["bit"].tolist()}


def test_sharded_over_8_devices_equals_one_device_exactly():
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=8", "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT, __file__], capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["8"] == out["1"]
    local = experiment(devices=None)
    assert out["1"] == local
    assert sum(local["counts"]) == 3000


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_trials": 0, "n_outcomes": 10}, "n_trials"),
        ({"n_trials": 2**32, "n_outcomes": 10}, "n_trials"),
        ({"n_trials": 10, "n_outcomes": 10, "chunk_size": 0}, "chunk_size"),
        ({"n_trials": 10, "reduce": "counts"}, "n_outcomes"),
        ({"n_trials": 10, "n_outcomes": 0}, "n_outcomes"),
        ({"n_trials": 10, "reduce": "median"}, "reduce"),
        ({"n_trials": 10, "n_outcomes": 10, "devices": 0}, "devices"),
        ({"n_trials": 10, "n_outcomes": 10, "devices": 10_000}, "devices"),
        ({"n_trials": 10, "n_outcomes": 10, "devices": []}, "devices"),
        ({"n_trials": 10, "n_outcomes": 10, "compiler_options": [("a", 1)]}, "compiler_options"),
    ],
)
def test_bad_input_names_the_argument(kwargs, match):
    n_trials = kwargs.pop("n_trials")
    with pytest.raises(PMarkValueError, match=match):
        sim.run_trials(KEY, _dice, n_trials, **kwargs)


def test_counts_need_a_scalar_step():
    with pytest.raises(PMarkValueError, match="scalar"):
        sim.run_trials(KEY, lambda k: jax.random.randint(k, (2,), 0, 3), 10, n_outcomes=3)


def test_compiler_options_are_scoped_to_the_run_and_keep_the_results():
    # The quick-mode options (what jax_disable_most_optimizations sets on CPU) are forwarded to this run's
    # compilation only: integer outcomes are bit-identical, floats agree to rounding, and no global flag changes.
    fast = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}
    flag = jax.config.read("jax_disable_most_optimizations")
    counts = [
        sim.run_trials(KEY, _dice, 1000, n_outcomes=10, compiler_options=o, allow_out_of_range=True)
        for o in (None, fast)
    ]
    np.testing.assert_array_equal(counts[0].counts, counts[1].counts)
    assert counts[0].n_out_of_range == counts[1].n_out_of_range
    plain, quick = (sim.run_trials(KEY, _pair, 500, compiler_options=o).outputs for o in (None, fast))
    np.testing.assert_array_equal(plain["bit"], quick["bit"])
    np.testing.assert_allclose(plain["u"], quick["u"], rtol=1e-12, atol=0)
    assert jax.config.read("jax_disable_most_optimizations") == flag
    # The options really reach XLA: an unknown one is rejected by the compiler.
    with pytest.raises(Exception, match="xla_no_such_option"):
        sim.run_trials(KEY, _dice, 10, n_outcomes=10, compiler_options={"xla_no_such_option": 1})


def test_out_of_range_outcomes_raise_unless_allowed():
    """A 50-outcome step counted with n_outcomes = 10 must not give a silently truncated histogram."""
    step = lambda k: jax.random.randint(k, (), 0, 50)  # noqa: E731
    with pytest.raises(PMarkValueError, match=r"outside 0\.\.9"):
        sim.run_trials(KEY, step, 2000, n_outcomes=10)
    res = sim.run_trials(KEY, step, 2000, n_outcomes=10, allow_out_of_range=True)
    assert res.counts.sum() + res.n_out_of_range == 2000 and res.n_out_of_range > 1000


def test_int_key_gives_a_clear_error():
    with pytest.raises(PMarkValueError, match=r"jax\.random\.key"):
        sim.run_trials(0, _dice, 10, n_outcomes=10, allow_out_of_range=True)
