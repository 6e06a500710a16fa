"""Worked ``pmark audit`` targets: watermark implementations written outside ``pmark_impl``, each with a known flaw
the audit should expose and (where one exists) a corrected twin that should pass (docs/audit.md).

* :mod:`.soft_z` — online-PMark-like generation; the paper's soft-count z-test (FPR above alpha, C19/X4) and the
  exact binomial test on the hard count (``make_correct_target``).
* :mod:`.simmark_in_sample` — SimMark (keyless) with its null rate and threshold fitted in-sample (optimism).
* :mod:`.semstamp_ref` — SemStamp as the reference implementation detects it (normal approximation, skewed LSH
  cells: per-key FPR), with its exact first-sentence law.
* :mod:`.biased_sampler` — an online-PMark-like sampler that keeps median ties on both sides (not
  distortion-free), and the exact rank-halving fix (``make_correct_target``).
* :mod:`.semstamp_z` — MarkLLM's SemStamp z-test on ideal green sentences: its size swings with ``T`` (fails
  ``fpr`` at ``T = 3`` and ``5`` only); the exact binomial test (``make_exact_target``).
* :mod:`.min_hash` — the candidate of minimum keyed hash: a uniform *distinct* candidate, TV 0.13 to the LM,
  claims distortion-freeness (caught at 1000 samples, likely missed at 200).

Run one with ``audit("examples.audit_targets.soft_z:make_target", tiny_env(), QUICK)`` from the repository root.
"""
