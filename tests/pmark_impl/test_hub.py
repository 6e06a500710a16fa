"""The hub hands the turn to one text at a time and wakes only that text (issue 40).

Each text of a group waits on its own condition (one lock for the hub); a hand-over notifies the text whose turn it
is and the end of a turn notifies the engine's thread. Before, every hand-over was a ``notify_all`` on one shared
condition: every waiting text woke, re-checked its predicate and slept again, so a turn cost O(texts) thread
wake-ups — on a GPU's group of ~100 texts, most of the CPU side of a run (measured: ``benchmarks/study_engine_ceiling``
with 96 texts, 2.7 s → 1.4 s offline). Measured here without a clock: the wake-ups that found it was not the
waking text's turn (a ``wait`` that its ``wait_for`` had to repeat). Negative control: the old hand-over (one
condition shared by the texts, ``notify_all``) on the same run wastes wake-ups.
"""

from __future__ import annotations

import threading
import types

import numpy as np
import pytest

from pmark_impl import WatermarkKey, generate_many
from pmark_impl.generation import _hub, _many
from pmark_impl.sampling import LMSentenceSampler, SamplingConfig
from tests.pmark_impl._impl_fakes import FakeEncoder

DIM = 16
PROMPTS = ["the cat sat.", "the dog sat!", "a cat.", "the dog. a cat.", "cat sat?", "the"]


class _Counted(threading.Condition):
    """A condition that counts its ``wait`` calls and the ``wait_for`` calls that had to wait."""

    def __init__(self, lock=None) -> None:
        super().__init__(lock)
        self.waits = self.waited_for = 0

    def wait(self, timeout=None):
        self.waits += 1
        return super().wait(timeout)

    def wait_for(self, predicate, timeout=None):
        if not predicate():
            self.waited_for += 1
        return super().wait_for(predicate, timeout)


class _WakesAll(_Counted):
    """A condition whose every notify wakes all its waiters (``notify_all``)."""

    def notify(self, n: int = 1) -> None:
        super().notify(2**31)


class _SharedWake(dict):
    """The old hand-over (the negative control): every text on one condition, every notify a ``notify_all``."""

    def __init__(self, texts, lock) -> None:
        shared = _WakesAll(lock)
        super().__init__({i: shared for i in texts})


def _wasted_wakeups(sampler, key, monkeypatch, shared: bool, **opts) -> tuple[int, int]:
    """``(wake-ups of a text that found it was not its turn, text waits)`` over one group of six texts."""
    hubs: list[_hub.Hub] = []

    class Recorded(_hub.Hub):
        def admit(self, texts: range) -> None:
            super().admit(texts)
            if shared:
                self.wake = _SharedWake(texts, self._lock)
            hubs.append(self)

    monkeypatch.setattr(_hub, "threading", types.SimpleNamespace(Condition=_Counted, RLock=threading.RLock))
    monkeypatch.setattr(_many, "Hub", Recorded)
    seeds = list(range(len(PROMPTS)))
    # a lost wake-up hangs: a watchdog turns it into a failure (the hub's waits have no timeout)
    got: list = []

    def texts() -> None:
        try:
            got.append(
                generate_many(key, sampler, FakeEncoder(DIM), PROMPTS, seeds=seeds, batch_texts=6, **opts)
            )
        except BaseException as exc:  # re-raised below, in the test's thread
            got.append(exc)

    run = threading.Thread(target=texts, daemon=True)
    run.start()
    run.join(timeout=120)
    assert not run.is_alive(), "the group hung: a hand-over woke nobody"
    if isinstance(got[0], BaseException):
        raise got[0]
    assert len(got[0]) == len(PROMPTS)
    (hub,) = hubs  # one group of six texts
    wakes = {id(c): c for c in hub.wake.values()}.values()
    waits = sum(c.waits for c in wakes)
    return waits - sum(c.waited_for for c in wakes), waits


@pytest.fixture(scope="module")
def sampler(tiny_lm):
    model, tok = tiny_lm
    return LMSentenceSampler(model, tok, SamplingConfig(temperature=1.0, top_p=0.95, max_sentence_tokens=8))


@pytest.fixture(scope="module")
def key():
    return WatermarkKey.generate(np.random.default_rng(4), "fake-encoder", DIM, 2)


@pytest.mark.parametrize(
    "opts",
    [
        {"scheme": "offline", "n_candidates": 16, "offline_batch": 4},  # streams: a turn per chunk of 4
        {"scheme": "online", "n_candidates": 4},
    ],
    ids=["offline", "online"],
)
def test_a_hand_over_wakes_only_the_text_whose_turn_it_is(sampler, key, monkeypatch, opts):
    opts = {**opts, "max_sentences": 3, "channels": 2}
    wasted, waits = _wasted_wakeups(sampler, key, monkeypatch, shared=False, **opts)
    assert waits >= len(PROMPTS)  # every text waited at least for its first request
    assert wasted == 0
    control, _ = _wasted_wakeups(sampler, key, monkeypatch, shared=True, **opts)
    # the engine's hand-over as it was (a notify_all to every text) on the same run: more wasted wake-ups than the
    # new one's wake-ups in all (measured 92 vs 33 offline, 52 vs 18 online). It under-counts the old cost (a
    # text's hand-back still wakes only the engine; it used to wake every text too): the safe direction.
    assert control > waits
