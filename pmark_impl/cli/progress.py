"""What a long ``pmark`` command is doing: phase lines and progress bars with an ETA that moves (issue 38).

Everything goes to stderr and is shown only when :func:`shown` says so: ``PMARK_PROGRESS=1`` shows it,
``PMARK_PROGRESS=0`` hides it, and otherwise it is shown iff stderr is a terminal (so logs and test output stay
clean unless asked). :func:`hidden` hides it for a block (``--quiet``).

* :func:`phase` — ``pmark: loading the encoder X …`` when a step starts and ``…: done in 3.1 s`` when it ends;
* :func:`bar` — a tqdm bar counting units of work, with the average rate (``smoothing=0``: the ETA grows while a
  unit stalls) and a :class:`~pmark_theory.infra.ticker.Ticker` that redraws it about once a second, so its
  elapsed time and ETA move between updates.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from tqdm import tqdm

from pmark_theory.infra.ticker import Ticker, progress_shown, try_redraw

__all__ = ["Phase", "StepBar", "TickingBar", "bar", "hidden", "phase", "shown"]

_HIDDEN = [0]  # depth of the hidden() blocks around the current call


def shown() -> bool:
    """Whether progress is shown: not inside :func:`hidden`, then ``PMARK_PROGRESS`` ``1`` / ``0``, else iff stderr
    is a terminal (:func:`pmark_theory.infra.ticker.progress_shown`, the rule ``pmark check`` follows too)."""
    return not _HIDDEN[0] and progress_shown()


@contextlib.contextmanager
def hidden(hide: bool = True) -> Iterator[None]:
    """No phase line nor bar inside the block when ``hide`` (``--quiet``); a no-op otherwise."""
    _HIDDEN[0] += bool(hide)
    try:
        yield
    finally:
        _HIDDEN[0] -= bool(hide)


def _seconds(t0: float) -> str:
    return f"{time.perf_counter() - t0:.1f} s"


class Phase:
    """What :func:`phase` yields: set ``outcome`` (default ``"done"``) to say how the step ended, e.g.
    ``"not fitted"`` for a step that ended without its result."""

    outcome: str = "done"


@contextlib.contextmanager
def phase(text: str, *, after: float = 0.0) -> Iterator[Phase]:
    """Announce the step ``text`` on stderr: ``pmark: TEXT …`` now, ``pmark: TEXT: done in N s`` at the end
    (``done`` is the yielded :class:`Phase`'s ``outcome``).

    An exception is re-raised after ``pmark: TEXT: stopped after N s``. Nothing is printed when not
    :func:`shown`. With ``after > 0`` nothing is printed for a step that ends within ``after`` seconds (a step
    that is usually instant and sometimes long, e.g. an attack that may load a model): the first line is printed
    by a timer once ``after`` seconds have passed, and the last only if the first was.
    """
    step = Phase()
    if not shown():
        yield step
        return
    t0, lock, started = time.perf_counter(), threading.Lock(), [False]

    def announce() -> None:
        with lock:
            if not started[0]:
                started[0] = True
                print(f"pmark: {text} …", file=sys.stderr, flush=True)

    timer = threading.Timer(after, announce) if after > 0 else None
    if timer is None:
        announce()
    else:
        timer.daemon = True
        timer.start()

    def end(line: str) -> None:
        if timer is not None:
            timer.cancel()
        with lock:
            started[0], was = True, started[0]  # a timer that fires now prints nothing
            if was:
                print(line, file=sys.stderr, flush=True)

    try:
        yield step
    except BaseException:
        end(f"pmark: {text}: stopped after {_seconds(t0)}")
        raise
    end(f"pmark: {text}: {step.outcome} in {_seconds(t0)}")


class TickingBar(tqdm):
    """A tqdm bar redrawn by a :class:`~pmark_theory.infra.ticker.Ticker` while it is open.

    ``close`` stops the ticker (joining its thread) before closing the bar, and may be called again; the bar is a
    context manager (tqdm's). tqdm's own monitor thread is not started (``monitor_interval = 0``): no thread
    outlives the bar.
    """

    monitor_interval = 0

    def __init__(self, *args: Any, tick_interval: float = 1.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ticker: Ticker | None = None
        if not self.disable:
            self.ticker = Ticker(self._tick, tick_interval).start()

    def _tick(self) -> None:
        if not self.disable:  # closed meanwhile
            try_redraw(self)  # never waits: a redraw is skipped while the bar is busy

    def close(self) -> None:
        """Stop the ticker, then close the bar (idempotent)."""
        ticker = getattr(self, "ticker", None)
        if ticker is not None:
            ticker.stop()
        super().close()


def bar(
    total: int | None,
    desc: str,
    unit: str,
    *,
    position: int | None = None,
    leave: bool = False,
    tick_interval: float = 1.0,
) -> TickingBar:
    """A :class:`TickingBar` on stderr counting ``unit`` s up to ``total`` (``None``: no total), disabled when not
    :func:`shown`.

    Args:
      total: the units of work.
      desc: the bar's label.
      unit: what one unit is ("sentence", "text").
      position: the bar's line (one bar per rank under torchrun).
      leave: keep the bar on screen once closed.
      tick_interval: seconds between redraws while no update comes.
    """
    return TickingBar(
        total=total,
        desc=desc,
        unit=unit,
        file=sys.stderr,
        disable=not shown(),
        leave=leave,
        position=position,
        smoothing=0,
        dynamic_ncols=True,
        tick_interval=tick_interval,
    )


class StepBar:
    """One bar over units of work of at most ``per_unit`` steps each (``pmark evaluate``: texts of at most
    ``max_sentences`` sentences): it advances by one per :meth:`step` and is topped up to ``done × per_unit`` by
    :meth:`unit_done` (a unit may end early, a resumed unit counts as done at once), so it always reaches its total.
    Calling the bar is :meth:`unit_done` (``run_evaluation``'s ``progress(label, done, total)``).

    Args:
      units: the units of work (this rank's).
      per_unit: the steps of a unit at most.
      desc: the bar's label.
      position: its line (one bar per rank under torchrun).
      tick_interval: seconds between redraws while no update comes.
    """

    def __init__(
        self, units: int, per_unit: int, desc: str, *, position: int | None = None, tick_interval: float = 1.0
    ) -> None:
        self.per_unit = int(per_unit)
        self.bar = bar(
            units * self.per_unit,
            desc,
            "sentence",
            position=position,
            leave=True,
            tick_interval=tick_interval,
        )
        self.label = ""
        self._lock = threading.Lock()  # steps come from every text's thread (generate_many)

    def step(self) -> None:
        """One step done (never past the total; safe from several threads)."""
        with self._lock:
            if self.bar.total is None or self.bar.n < self.bar.total:
                self.bar.update(1)

    def stage(self, label: str, stage: str) -> None:
        """Show ``label: stage`` after the bar (e.g. ``offline-N16-b4: generating``)."""
        text = f"{label}: {stage}"
        if text != self.label:
            self.label = text
            self.bar.set_postfix_str(text, refresh=False)

    def unit_done(self, label: str, done: int, total: int) -> None:
        """``done`` of ``total`` units finished (``run_evaluation``'s ``progress`` callback); closes at the end."""
        if done == total:
            self.stage(label, "done")
        with self._lock:
            self.bar.update(max(done * self.per_unit - self.bar.n, 0))
        if done == total:
            self.close()

    def close(self) -> None:
        """Close the bar (idempotent)."""
        self.bar.close()

    __call__ = unit_done
