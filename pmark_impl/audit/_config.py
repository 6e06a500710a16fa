"""How much an audit samples: :class:`AuditConfig`, its ``--quick`` preset, and the seeds every part derives."""

from __future__ import annotations

import hashlib
from typing import Any, NamedTuple

from pmark_theory._validate import PMarkValueError, check_size, check_unit_interval

__all__ = [
    "LIMITS",
    "MAX_NULL_DETECTIONS",
    "QUICK",
    "AuditConfig",
    "check_config",
    "derive_seed",
    "null_lengths",
]

#: ``field -> (minimum, maximum)`` of every size of an :class:`AuditConfig` (``pmark audit``'s options have the
#: same bounds): far above what an audit needs (the defaults are 20 keys, 100 texts, 6 sentences, 2000 samples),
#: low enough that a mistyped size is refused instead of running for days or exhausting memory (issue 36).
LIMITS: dict[str, tuple[int, int]] = {
    "keys": (2, 1000),
    "texts": (1, 10_000),
    "sentences": (1, 64),
    "distortion_samples": (1, 1_000_000),
    "power_keys": (1, 1000),
    "power_texts": (1, 10_000),
    "leakage_queries": (8, 100_000),
    "seed": (0, 2**63 - 1),
}
#: Most detector calls of the null part per source: ``keys x texts x lengths`` (held-out texts at every length).
MAX_NULL_DETECTIONS = 10_000_000
#: The longest time limit of one call to a target (``--timeout``, the ``timeout`` option), in seconds: a day.
MAX_TIMEOUT = 86_400.0
#: Most leakage budgets and most attacks in one configuration.
MAX_BUDGETS = 16
MAX_ATTACKS = 16


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
    """``config`` checked: every size within :data:`LIMITS`, the attacks known (one-line ``PMarkValueError``
    naming the field, before any work)."""
    if not isinstance(config, AuditConfig):
        raise PMarkValueError(f"config must be an AuditConfig, got {type(config).__name__}")
    for name in ("keys", "texts", "sentences", "distortion_samples", "power_keys", "power_texts", "seed"):
        lo, hi = LIMITS[name]
        check_size(f"config.{name}", getattr(config, name), minimum=lo, maximum=hi)
    check_unit_interval("config.alpha", config.alpha, open_left=True, open_right=True)
    _check_budgets(config.leakage_queries)
    lengths = null_lengths(config) if config.lengths is None else _check_lengths(config)
    if config.keys * config.texts * len(lengths) > MAX_NULL_DETECTIONS:
        raise PMarkValueError(
            f"config: keys x texts x lengths = {config.keys} x {config.texts} x {len(lengths)} detector calls per "
            f"null source exceeds {MAX_NULL_DETECTIONS:,}; use fewer keys, texts or lengths"
        )
    sources = config.sources
    if (
        isinstance(sources, str)
        or not isinstance(sources, (tuple, list))
        or not sources
        or any(s not in SOURCES for s in sources)
        or len(set(sources)) != len(sources)
    ):
        raise PMarkValueError(
            f"config.sources must be a non-empty subset of {', '.join(SOURCES)}, got {sources!r}"
        )
    _check_attacks(config.attacks)
    return config


def _check_budgets(budgets: Any) -> None:
    lo, hi = LIMITS["leakage_queries"]
    q = list(budgets) if isinstance(budgets, (tuple, list)) else None
    if (
        not q
        or len(q) > MAX_BUDGETS
        or any(isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi for v in q)
        or q != sorted(set(q))
    ):
        raise PMarkValueError(
            f"config.leakage_queries must be 1 to {MAX_BUDGETS} increasing integers in {lo}..{hi}, got "
            f"{_short(budgets)}"
        )


def _check_lengths(config: AuditConfig) -> tuple[int, ...]:
    lengths = list(config.lengths) if isinstance(config.lengths, (tuple, list)) else None
    if (
        not lengths
        or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in lengths)
        or lengths != sorted(set(lengths))
        or lengths[-1] > config.sentences
    ):
        raise PMarkValueError(
            f"config.lengths must be increasing integers from 1 to sentences = {config.sentences}, got "
            f"{_short(config.lengths)}"
        )
    return tuple(lengths)


def _check_attacks(attacks: Any) -> None:
    """Names of the attack registry only (``pmark attacks``): a plug-in named ``module:attribute`` is refused here,
    before any work, and never imported."""
    from pmark_impl.attacks import list_attacks

    known = list_attacks()
    if isinstance(attacks, str) or not isinstance(attacks, (tuple, list)) or len(attacks) > MAX_ATTACKS:
        raise PMarkValueError(
            f"config.attacks must be a tuple of at most {MAX_ATTACKS} attack names, got {_short(attacks)}"
        )
    for name in attacks:
        if not isinstance(name, str) or name not in known:
            raise PMarkValueError(
                f"config.attacks: unknown attack {_short(name)} (the audit runs attacks of the registry: "
                f"{', '.join(known)})"
            )
    if len(set(attacks)) != len(attacks):
        raise PMarkValueError(f"config.attacks names an attack twice: {_short(attacks)}")


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


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
