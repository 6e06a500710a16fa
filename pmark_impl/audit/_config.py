"""How much an audit samples: :class:`AuditConfig`, its ``--quick`` preset, and the seeds every part derives."""

from __future__ import annotations

import hashlib
from typing import Any, NamedTuple

from pmark_theory._validate import PMarkValueError, check_positive_int, check_unit_interval

__all__ = ["QUICK", "AuditConfig", "check_config", "derive_seed", "null_lengths"]


class AuditConfig(NamedTuple):
    """Sample sizes and levels of an audit (defaults: the full audit, a few minutes per target on the tiny LM).

    Attributes:
      keys: keys of the null-calibration part (per source).
      texts: null texts per half (calibration half, test half) per source.
      sentences: ``T``, sentences per text (null, power, reproducibility).
      lengths: the text lengths the null part decides ``fpr`` at (``None``: every length from 2 to ``T``,
        :func:`null_lengths`); the texts of a shorter length are prefixes of the ``T``-sentence texts.
      distortion_samples: first sentences drawn for the distortion part, one fresh key each.
      power_keys: keys of the power part; power_texts: watermarked texts per key.
      leakage_queries: query budgets of the key-leakage curve (increasing).
      alpha: the detection level.
      seed: the audit's seed (every key, text and resample derives from it).
      attacks: attacks of the robustness part (registry names).
      sources: null sources: ``"human"`` (a corpus) and ``"lm"`` (unwatermarked LM text).
    """

    keys: int = 20
    texts: int = 100
    sentences: int = 6
    distortion_samples: int = 2000
    power_keys: int = 4
    power_texts: int = 25
    leakage_queries: tuple[int, ...] = (32, 128, 512, 2048)
    alpha: float = 0.05
    seed: int = 0
    attacks: tuple[str, ...] = ("sentence-delete", "sentence-swap", "sentence-insert", "word-delete")
    sources: tuple[str, ...] = ("human", "lm")
    lengths: tuple[int, ...] | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (the cache key of a resumed audit)."""
        d = self._asdict()
        d["leakage_queries"] = list(self.leakage_queries)
        d["attacks"] = list(self.attacks)
        d["sources"] = list(self.sources)
        d["lengths"] = list(null_lengths(self))
        return d


#: ``--quick``: about a minute per target on the tiny LM on 2 cores.
QUICK = AuditConfig(
    keys=8,
    texts=40,
    sentences=4,
    distortion_samples=800,
    power_keys=2,
    power_texts=12,
    leakage_queries=(32, 128, 512),
)

SOURCES = ("human", "lm")


def check_config(config: Any) -> AuditConfig:
    """``config`` checked (one-line ``PMarkValueError`` naming the field)."""
    if not isinstance(config, AuditConfig):
        raise PMarkValueError(f"config must be an AuditConfig, got {type(config).__name__}")
    for name in ("keys", "texts", "sentences", "distortion_samples", "power_keys", "power_texts"):
        check_positive_int(name, getattr(config, name))
    if config.keys < 2:
        raise PMarkValueError("keys must be >= 2 (the per-key part compares keys)")
    check_positive_int("seed", config.seed, minimum=0)
    check_unit_interval("alpha", config.alpha, open_left=True, open_right=True)
    q = list(config.leakage_queries)
    if not q or any(not isinstance(v, int) or v < 8 for v in q) or q != sorted(set(q)):
        raise PMarkValueError("leakage_queries must be increasing integers >= 8")
    if config.lengths is not None:
        lengths = list(config.lengths)
        if (
            not lengths
            or any(not isinstance(v, int) or isinstance(v, bool) or v < 1 for v in lengths)
            or lengths != sorted(set(lengths))
            or lengths[-1] > config.sentences
        ):
            raise PMarkValueError("lengths must be increasing integers from 1 to sentences")
    bad = [s for s in config.sources if s not in SOURCES]
    if bad or not config.sources:
        raise PMarkValueError(f"sources must be a non-empty subset of {', '.join(SOURCES)}")
    return config


def derive_seed(config: AuditConfig, *parts: Any) -> int:
    """A 31-bit seed for one part of the audit: ``SHA-256(seed / parts)`` (independent of the order of work)."""
    digest = hashlib.sha256("/".join(str(p) for p in (config.seed, *parts)).encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big") >> 1


def null_lengths(config: AuditConfig) -> tuple[int, ...]:
    """The lengths the null part decides at: ``config.lengths``, else every ``t`` in ``2..T`` (``(1,)`` at ``T = 1``).

    A discrete detector's size swings with the length (a count test's attainable levels move with ``T``): one
    length can pass while its neighbours are anti-conservative, so every length a user may detect at is tested.
    """
    if config.lengths is not None:
        return tuple(config.lengths)
    return tuple(range(2, config.sentences + 1)) if config.sentences >= 2 else (1,)
