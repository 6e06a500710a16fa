"""Upper bounds of every size-like setting: one place, used by the command line, provenance records and evaluate.

A setting whose memory or work grows with its value is bounded by what one machine can run, and the bound is
the SAME wherever the setting can come from: a command-line flag (``pmark generate``, ``detect``,
``evaluate``), a provenance record that ``pmark detect`` follows (:mod:`pmark_impl.generation._provenance_schema`) or an
evaluation's configuration. A record edited to ``N = 65536`` or ``--lsh-dim 31`` (``2^31`` cells: JAX asks for
52 GB) is refused with one line before any model loads, instead of running for minutes or dying in the
allocator.

The numbers (SmolLM2-135M in float32 keeps about 46 kB of KV cache per token and candidate row; the rows of one
sentence share a batch):

* :data:`MAX_CANDIDATES` ``N`` (and :data:`MAX_OFFLINE_BATCH`): 1024 rows of a 300-token context hold about
  14 GB of cache, what a 24 GB machine can still run; the paper sweeps ``N <= 64``.
* :data:`MAX_LSH_DIM` ``h``: ``M = 2^h <= 65536`` cells (:data:`MAX_CELLS`), whose green sets are drawn per
  sentence; :data:`MAX_CLUSTERS` bounds k-SemStamp's ``k`` by the same ``M``.
* :data:`MAX_TRIALS`: SemStamp / SimMark batches of ``N`` per sentence before the fallback.
* :data:`MAX_SENTENCES`: sentences of one generated text — the most one text may hold for detection too.
* :data:`MAX_SENTENCE_TOKENS`: the token cap of one candidate sentence.
* :data:`MAX_CHANNELS` ``b``: a key file's bound (``online`` needs ``N >= 2^b``).
* :data:`MAX_BATCH_TEXTS`: texts that share the forward passes of :func:`pmark_impl.generate_many` (one thread
  each; ``pmark evaluate --batch-texts``'s bound).
* :data:`MAX_BATCH_ROWS`: rows of one forward pass of the batched engine (``generate_many``'s ``max_rows``):
  8 times the 1024 rows the memory sizing ever picks (:func:`pmark_impl.sampling._kv.rows_for_memory`), about
  110 GB of SmolLM2 cache at 300 tokens, the most one accelerator holds.
"""

from __future__ import annotations

from typing import Any

from pmark_theory._validate import check_size

__all__ = [
    "LIMITS",
    "MAX_BATCH_ROWS",
    "MAX_BATCH_TEXTS",
    "MAX_CANDIDATES",
    "MAX_CELLS",
    "MAX_CHANNELS",
    "MAX_CLUSTERS",
    "MAX_LSH_DIM",
    "MAX_OFFLINE_BATCH",
    "MAX_SENTENCES",
    "MAX_SENTENCE_TOKENS",
    "MAX_TRIALS",
    "check_limit",
]

MAX_CANDIDATES = 1024
MAX_OFFLINE_BATCH = MAX_CANDIDATES
MAX_CELLS = 1 << 16
MAX_LSH_DIM = MAX_CELLS.bit_length() - 1  # 16: M = 2^h <= MAX_CELLS
MAX_CLUSTERS = MAX_CELLS
MAX_TRIALS = 1024
MAX_SENTENCES = 10_000
MAX_SENTENCE_TOKENS = 4096
MAX_CHANNELS = 64
MAX_BATCH_TEXTS = 4096
MAX_BATCH_ROWS = 8 * MAX_CANDIDATES

#: ``setting -> (minimum, maximum)``: the settings of a generation, by the names of its provenance record.
LIMITS: dict[str, tuple[int, int]] = {
    "n_candidates": (1, MAX_CANDIDATES),
    "offline_batch": (1, MAX_OFFLINE_BATCH),
    "lsh_dim": (1, MAX_LSH_DIM),
    "n_clusters": (2, MAX_CLUSTERS),
    "max_trials": (1, MAX_TRIALS),
    "max_sentences": (1, MAX_SENTENCES),
    "max_sentence_tokens": (1, MAX_SENTENCE_TOKENS),
    "channels": (1, MAX_CHANNELS),
}


def check_limit(name: str, value: Any) -> int:
    """``value`` if it is an integer within the bounds of setting ``name`` (:data:`LIMITS`).

    Raises:
      PMarkValueError: not an integer (bools refused) or out of range; the message names both ends.
    """
    lo, hi = LIMITS[name]
    return check_size(name, value, minimum=lo, maximum=hi)
