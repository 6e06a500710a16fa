"""A daemon thread that calls a function about once a second until stopped: a progress bar's clock.

A tqdm bar redraws only when it is updated, so while one unit of work stalls (a long generation, a slow check)
its elapsed time and ETA stand still. :class:`Ticker` redraws it between updates (``Ticker(bar.refresh)``); it
knows nothing of tqdm, so every package of the toolkit may use it (``pmark check``'s runner,
``pmark_impl.cli.progress``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType

__all__ = ["THREAD_NAME", "Ticker"]

THREAD_NAME = "pmark-progress-ticker"


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
        """Stop ticking and wait for the thread to end (idempotent; a no-op from the ticking thread itself)."""
        self._stopped.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

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
