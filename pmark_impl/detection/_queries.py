"""A per-key count of detection queries, for a key holder who serves a detector (S1, docs/security.md §4).

Every output level of the detector leaks the key to whoever submits chosen texts, given enough queries (S1):
:data:`pmark_theory._key_recovery.QUERY_WARNING` holds, per output level, the number of queries at which the
strongest chosen-text attack the toolkit has measured recovers the pivots (mean ``|cos| >= 0.9``; totals: the
adaptive decoder, about 1,500; decisions: about 4,700). Each is an UPPER BOUND on the safe budget: an attacker may
do better. A provider who answers queries with a key records each one here and is warned when that budget is
spent: rotate the key then.

**Opt-in.** Nothing is counted unless asked: :class:`QueryCounter` in Python, ``pmark detect --count-queries
STATE`` on the command line. The key holder's own runs without the option are never counted, and nothing is written
anywhere but the state file named.

**The state file** is JSON (mode 0600, at most :data:`STATE_LIMIT_BYTES`)::

    {"format": "pmark-query-counts", "version": 1,
     "keys": {"<key id>": {"counts": {"total": 12, "decision": 3}, "warned": 0}}}

keyed by :func:`key_id`, the public fingerprint of the key's secret (``HMAC(secret, "fingerprint")``, the
``key_fingerprint`` of the uncalibrated key), which reveals nothing about the pivots or bits. A calibrated copy
or a context-seeded variant of a key shares its secret, hence its pivots and its count. One state file may hold
many keys.

**Budget.** With ``n_l`` queries answered at level ``l`` and thresholds ``Q_l`` (``QUERY_WARNING``), the budget
used is ``Σ_l n_l / Q_l`` (exact fractions): for one level it reaches 1 exactly at the ``Q_l``-th query. A
warning is due once per crossing of each whole number (1, 2, …): ``warned`` stores the last one warned. The
decision level has its own measured budget (the adaptive decision attack: about 4 decisions per probe); when the
table has no entry for it, the total level's is used (a decision is a function of the detector's statistic, so it
leaks no faster than the statistic: the smaller figure is the safe fallback).

**Concurrency.** Each update takes an exclusive ``flock`` on the state file (waiting at most ``timeout``
seconds), reads it, and replaces it atomically (:func:`pmark_theory.infra.files.write_atomic`: temporary file, fsync,
rename); a waiter that finds the file replaced meanwhile locks the new one. Two processes counting at once lose
no query, and a crash leaves the previous state or the new one, never a torn file. A file that is not a state
file of pmark (a symbolic link, not a regular file, other content) is refused and left untouched.
"""

from __future__ import annotations

import contextlib
import fractions
import json
import math
import os
import stat
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from pmark_impl.keys import check_key
from pmark_impl.schemes import DETECTOR_OUTPUT_LEVELS
from pmark_theory._validate import PMarkValueError
from pmark_theory.infra.files import write_atomic
from pmark_theory.infra.json import loads_strict

__all__ = [
    "STATE_FORMAT",
    "STATE_LIMIT_BYTES",
    "QueryCounter",
    "QueryCounterError",
    "QueryStatus",
    "key_id",
    "warning_thresholds",
]

STATE_FORMAT = "pmark-query-counts"
_VERSION = 1
#: Largest state file read (4 MiB: tens of thousands of keys).
STATE_LIMIT_BYTES = 4 << 20
_MAX_COUNT = 2**62
_HEX = frozenset("0123456789abcdef")


class QueryCounterError(PMarkValueError):
    """The state file cannot be used (not a state file of pmark, locked too long, …), or no budget is known."""


def key_id(key: Any) -> str:
    """The public identifier the counter files ``key`` under: 16 hex digits of ``HMAC(secret, "fingerprint")``.

    It is the ``key_fingerprint`` of the uncalibrated key (S1 leaks the secret's pivots, shared by every
    calibration and seeding of one secret), and reveals nothing about them.
    """
    return check_key(key).prf("fingerprint", 8).hex()


def warning_thresholds() -> dict[str, int]:
    """``level -> queries`` for the levels the detector prints, from ``pmark_theory._key_recovery.QUERY_WARNING``.

    Raises:
      QueryCounterError: ``QUERY_WARNING`` missing, or without a positive integer for ``"evidence"`` or
        ``"total"`` (``"decision"`` falls back to ``"total"``'s, module docstring).
    """
    from pmark_theory import _key_recovery

    table = getattr(_key_recovery, "QUERY_WARNING", None)
    if not isinstance(table, Mapping):
        raise QueryCounterError(
            "this pmark_theory has no measured query budget (pmark_theory._key_recovery.QUERY_WARNING), so "
            "queries cannot be counted against it; update the toolkit"
        )
    out = {}
    for level in DETECTOR_OUTPUT_LEVELS:
        value = table.get(level, table.get("total") if level == "decision" else None)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise QueryCounterError(
                f"pmark_theory._key_recovery.QUERY_WARNING has no positive integer budget for the {level!r} "
                f"output level (got {value!r})"
            )
        out[level] = value
    return out


class QueryStatus(NamedTuple):
    """A key's count after one :meth:`QueryCounter.record` (or as read by :meth:`QueryCounter.status`).

    Attributes:
      key_id: :func:`key_id` of the key.
      level: the output level the query was answered at.
      queries: the queries answered at ``level`` with this key, this one included.
      threshold: ``QUERY_WARNING[level]``: the queries at which the strongest measured attack on that level
        recovers the key (an upper bound on the safe budget).
      counts: the queries answered with this key at each level.
      budget_used: ``Σ_l counts[l] / threshold_l`` (1: the budget of docs/security.md is spent).
      over_budget: ``budget_used >= 1``, computed exactly.
      crossed: this record took ``budget_used`` past a whole number for the first time: warn now (once).
    """

    key_id: str
    level: str
    queries: int
    threshold: int
    counts: dict[str, int]
    budget_used: float
    over_budget: bool
    crossed: bool

    def warning(self) -> str:
        """The one-line warning (meaningful when :attr:`over_budget`)."""
        n = self.queries
        return (
            f"key {self.key_id} has answered {n} detection quer{'y' if n == 1 else 'ies'} at the {self.level!r} "
            f"output level ({sum(self.counts.values())} at all levels, {self.budget_used:.2f} of its budget); "
            f"the budget of this level is {self.threshold} queries, where the strongest measured chosen-text "
            "attack recovers the key (QUERY_WARNING; S1, docs/security.md; an upper bound on the safe budget: an "
            "attacker may do better): rotate the key (pmark keygen)"
        )

    def to_dict(self) -> dict[str, Any]:
        """The ``query_counter`` block of ``pmark detect``'s JSON (the counter's state, nothing about the text)."""
        out: dict[str, Any] = {
            "level": self.level,
            "queries": self.queries,
            "warning_at": self.threshold,
            "budget_used": self.budget_used,
            "over_budget": self.over_budget,
        }
        if self.over_budget:
            out["warning"] = self.warning()
        return out


class QueryCounter:
    """Counts the detection queries answered with each key in the state file ``path`` (module docstring).

    Args:
      path: the state file: created on the first :meth:`record` (mode 0600); an existing one must be a state
        file of pmark.
      timeout: seconds to wait for another process's lock before giving up.

    Raises:
      QueryCounterError: ``path`` exists and is not a regular file or not a state file of pmark, or names a
        directory.

    Example::

        counter = QueryCounter("k.key.queries.json")
        result = detect(key, text, encoder)
        status = counter.record(key, "decision")
        if status.crossed:
            log.warning(status.warning())
    """

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 30.0) -> None:
        raw = os.fspath(path)
        if not raw or raw.endswith((os.sep, os.altsep or os.sep)):
            raise QueryCounterError(f"query state file {raw!r} must name a file, not a directory")
        self.path = Path(raw)
        self.timeout = float(timeout)
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise QueryCounterError(f"cannot use query state file {raw}: {exc.strerror or exc}") from None
        if not stat.S_ISREG(st.st_mode):
            raise self._foreign("is not a regular file")
        with self._opened() as fd:
            self._parse(_read_fd(fd, self.path))

    def record(self, key: Any, level: str, n: int = 1) -> QueryStatus:
        """Add ``n`` queries answered with ``key`` at output ``level``; return the key's new status.

        Raises:
          QueryCounterError: a bad ``level`` or ``n``, no known budget, a foreign or corrupt state file, a lock
            held longer than ``timeout``.
          OSError: the state file cannot be written (disk full, permissions).
        """
        kid = key_id(key)
        if level not in DETECTOR_OUTPUT_LEVELS:
            raise QueryCounterError(f"level must be one of {list(DETECTOR_OUTPUT_LEVELS)}, got {level!r}")
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= _MAX_COUNT:
            raise QueryCounterError(f"n must be a positive integer, got {n!r}")
        thresholds = warning_thresholds()
        self._create()
        with self._locked() as fd:
            state = self._parse(_read_fd(fd, self.path))
            entry = state["keys"].setdefault(kid, {"counts": {}, "warned": 0})
            entry["counts"][level] = min(entry["counts"].get(level, 0) + n, _MAX_COUNT)
            used = _used(entry["counts"], thresholds)
            crossed = math.floor(used) > entry["warned"]
            if crossed:
                entry["warned"] = math.floor(used)
            write_atomic(self.path, _dump(state), force=True, mode=0o600, what="query state file")
        return _status(kid, level, entry["counts"], thresholds, used, crossed)

    def status(self, key: Any, level: str = "total") -> QueryStatus:
        """The key's counts as stored (``crossed`` is false; nothing is written)."""
        kid = key_id(key)
        if level not in DETECTOR_OUTPUT_LEVELS:
            raise QueryCounterError(f"level must be one of {list(DETECTOR_OUTPUT_LEVELS)}, got {level!r}")
        thresholds = warning_thresholds()
        counts: dict[str, int] = {}
        if os.path.lexists(self.path):
            with self._opened() as fd:
                counts = self._parse(_read_fd(fd, self.path))["keys"].get(kid, {}).get("counts", {})
        return _status(kid, level, counts, thresholds, _used(counts, thresholds), False)

    # ----------------------------------------------------------------------------------------------------------
    def _foreign(self, why: str) -> QueryCounterError:
        return QueryCounterError(
            f"query state file {self.path} {why}, so it is not a query-count file of pmark; it is left alone: "
            "choose another file"
        )

    def _create(self) -> None:
        """Create an empty state file when there is none (atomically: never over another process's)."""
        if os.path.lexists(self.path):
            return
        with contextlib.suppress(FileExistsError):
            write_atomic(self.path, _dump(_empty()), mode=0o600, what="query state file")

    @contextlib.contextmanager
    def _opened(self) -> Iterator[int]:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(self.path, flags)
        except OSError as exc:
            if os.path.islink(self.path):
                raise self._foreign("is a symbolic link") from None
            raise QueryCounterError(
                f"cannot read query state file {self.path}: {exc.strerror or exc}"
            ) from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise self._foreign("is not a regular file")
            yield fd
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[int]:
        """The state file, open and exclusively locked; re-opened if another process replaced it meanwhile."""
        import fcntl

        deadline = time.monotonic() + self.timeout
        while True:
            with self._opened() as fd:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise QueryCounterError(
                            f"query state file {self.path} stayed locked by another process for {self.timeout:g} s"
                        ) from None
                    time.sleep(0.002)
                    continue
                try:
                    now = os.stat(self.path, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                mine = os.fstat(fd)
                if (now.st_dev, now.st_ino) != (mine.st_dev, mine.st_ino):
                    continue  # replaced by the previous holder: lock the new file
                yield fd
                return

    def _parse(self, raw: bytes) -> dict[str, Any]:
        """The state in ``raw``, checked field by field (anything else: not a state file of pmark)."""
        try:
            doc = loads_strict(raw, what=f"query state file {self.path}")
        except PMarkValueError:
            raise self._foreign("is not a JSON document") from None
        if not isinstance(doc, dict) or doc.get("format") != STATE_FORMAT:
            raise self._foreign(f"does not say format {STATE_FORMAT!r}")
        if set(doc) != {"format", "version", "keys"} or doc["version"] != _VERSION:
            raise self._foreign(f"is not version {_VERSION} with the fields format, version and keys")
        keys = doc["keys"]
        if not isinstance(keys, dict) or not all(_valid_entry(k, v) for k, v in keys.items()):
            raise self._foreign("holds an entry that is not a key id with counts per output level")
        return doc


def _valid_entry(kid: Any, entry: Any) -> bool:
    def count(x: Any) -> bool:
        return isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= _MAX_COUNT

    return (
        isinstance(kid, str)
        and len(kid) == 16
        and set(kid) <= _HEX
        and isinstance(entry, dict)
        and set(entry) == {"counts", "warned"}
        and count(entry["warned"])
        and isinstance(entry["counts"], dict)
        and set(entry["counts"]) <= set(DETECTOR_OUTPUT_LEVELS)
        and all(count(v) for v in entry["counts"].values())
    )


def _empty() -> dict[str, Any]:
    return {"format": STATE_FORMAT, "version": _VERSION, "keys": {}}


def _dump(state: dict[str, Any]) -> bytes:
    return (json.dumps(state, indent=1, sort_keys=True) + "\n").encode("utf-8")


def _read_fd(fd: int, path: Path) -> bytes:
    parts, total = [], 0
    while total <= STATE_LIMIT_BYTES:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        parts.append(chunk)
        total += len(chunk)
    if total > STATE_LIMIT_BYTES:
        raise QueryCounterError(f"query state file {path} is too large (more than {STATE_LIMIT_BYTES} bytes)")
    return b"".join(parts)


def _used(counts: Mapping[str, int], thresholds: Mapping[str, int]) -> fractions.Fraction:
    return sum((fractions.Fraction(n, thresholds[lv]) for lv, n in counts.items()), fractions.Fraction(0))


def _status(kid, level, counts, thresholds, used, crossed) -> QueryStatus:
    return QueryStatus(
        key_id=kid,
        level=level,
        queries=int(counts.get(level, 0)),
        threshold=thresholds[level],
        counts=dict(counts),
        budget_used=float(used),
        over_budget=used >= 1,
        crossed=bool(crossed),
    )
