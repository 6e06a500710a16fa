"""A daemon thread that calls a function about once a second until stopped: a progress bar's clock.

A tqdm bar redraws only when it is updated, so while one unit of work stalls (a long generation, a slow check)
its elapsed time and ETA stand still. :class:`Ticker` redraws it between updates (``Ticker(bar.refresh)``); it
knows nothing of tqdm, so every package of the toolkit may use it (``pmark check``'s runner,
``pmark_impl.cli.progress``); :func:`progress_shown` is the one rule for whether progress is shown at all.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any

__all__ = ["JOIN_TIMEOUT", "THREAD_NAME", "Ticker", "progress_shown", "try_redraw"]

THREAD_NAME = "pmark-progress-ticker"
#: Seconds :meth:`Ticker.stop` waits for the thread (a tick blocked in a display never holds the program up).
JOIN_TIMEOUT = 2.0


def progress_shown() -> bool:
    """Whether progress displays are shown: ``PMARK_PROGRESS=1`` shows them, ``0`` hides them, and otherwise
    they are shown iff stderr is a terminal (logs and captured output stay clean unless asked)."""
    env = os.environ.get("PMARK_PROGRESS", "")
    if env in ("0", "1"):
        return env == "1"
    isatty = getattr(sys.stderr, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (OSError, ValueError):  # a closed or detached stream
        return False


def try_redraw(bar: Any) -> bool:
    """Redraw a tqdm bar from another thread without ever waiting: take each of its write locks without blocking
    (tqdm's default lock holds a multiprocessing and a thread lock), redraw if all were free, release them.

    tqdm's own ``refresh(lock_args=(False,))`` cannot be used: its default lock's ``acquire`` returns ``None``, so
    ``refresh`` reads a free lock as busy and returns *holding* it, and the next update blocks for ever. A bar
    whose lock is busy (e.g. left held by a Ctrl-C inside a redraw: tqdm releases it without ``try``/``finally``)
    is skipped. Returns whether it was redrawn.
    """
    locks = getattr(getattr(bar, "_lock", None), "locks", None)
    if not isinstance(locks, list):  # a lock we do not know how to try: no redraw rather than a wait
        return False
    held = []
    try:
        for lock in locks:
            if not lock.acquire(False):
                return False
            held.append(lock)
        bar.refresh(nolock=True)
        return True
    finally:
        for lock in reversed(held):
            lock.release()


class Ticker:
    """Calls ``tick()`` every ``interval`` seconds on a daemon thread, from :meth:`start` until :meth:`stop`.

    A ``tick`` that raises stops the ticking quietly (a progress display must never break the work it shows).
    :meth:`stop` is idempotent and joins the thread, so no thread outlives it; the ticker is also a context
    manager (``with Ticker(bar.refresh): ...``).

    Args:
      tick: the function called (e.g. a tqdm bar's ``refresh``).
      interval: seconds between calls (> 0).
    """

    def __init__(self, tick: Callable[[], object], interval: float = 1.0) -> None:
        if not interval > 0:
            raise ValueError(f"interval must be > 0, got {interval!r}")
        self._tick = tick
        self._interval = float(interval)
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def alive(self) -> bool:
        """Whether the ticking thread is running."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> Ticker:
        """Start ticking (once; a stopped ticker does not start again). Returns the ticker."""
        if self._thread is None and not self._stopped.is_set():
            self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop ticking and wait for the thread to end, at most :data:`JOIN_TIMEOUT` seconds (idempotent; a no-op
        from the ticking thread itself). The tick should never block (:func:`try_redraw` skips a redraw while
        the bar is busy); a daemon thread still blocked after the timeout cannot keep
        the process alive."""
        self._stopped.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(JOIN_TIMEOUT)

    def _run(self) -> None:
        while not self._stopped.wait(self._interval):
            try:
                self._tick()
            except Exception:  # a broken display stops redrawing; the work goes on
                return

    def __enter__(self) -> Ticker:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
