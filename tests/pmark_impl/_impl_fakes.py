"""Fakes for the keys/generation/detection/CLI tests: a finite-universe sentence sampler and a fixed encoder.

With a finite list of sentences of known probabilities and fixed unit embeddings every law is exact, and tests
run in milliseconds (no LM, no encoder download).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import torch

from pmark_impl.sampling import Candidate


def universe(k: int) -> list[str]:
    """``k`` distinct one-sentence strings that ``split_sentences`` keeps intact."""
    return [f"Fact number {i} is noted." for i in range(k)]


class FakeSampler:
    """iid draws from a fixed finite law (context-free), with the real sampler's signature."""

    def __init__(
        self, sentences: Sequence[str], probs: Sequence[float] | None = None, outcome: str = "sentence"
    ):
        self.sentences = list(sentences)
        p = np.full(len(sentences), 1.0 / len(sentences)) if probs is None else np.asarray(probs, dtype=float)
        self.probs = torch.tensor(p, dtype=torch.float64)
        self.outcome = outcome
        self.contexts: list[str] = []
        self.calls = 0

    def sample(self, context: str, n: int, generator: torch.Generator) -> list[Candidate]:
        self.calls += 1
        self.contexts.append(context)
        idx = torch.multinomial(self.probs, n, replacement=True, generator=generator).tolist()
        return [Candidate(self.sentences[i], 5, self.outcome) for i in idx]


class ScriptedSampler:
    """Returns the given candidate texts in order, ``n`` at a time (then wraps around)."""

    def __init__(self, texts: Sequence[str], outcomes: Sequence[str] | None = None):
        self.texts = list(texts)
        self.outcomes = list(outcomes) if outcomes is not None else ["sentence"] * len(self.texts)
        self.pos = 0
        self.requests: list[int] = []

    def sample(self, context: str, n: int, generator: torch.Generator) -> list[Candidate]:
        self.requests.append(n)
        out = []
        for _ in range(n):
            i = self.pos % len(self.texts)
            out.append(Candidate(self.texts[i], 3, self.outcomes[i]))
            self.pos += 1
        return out


class FakeEncoder:
    """Fixed unit embeddings: given vectors for known texts, a hash-seeded random unit vector otherwise."""

    def __init__(self, dim: int, table: dict[str, np.ndarray] | None = None, name: str = "fake-encoder"):
        self.dim = dim
        self.name = name
        self.table = {} if table is None else {k: np.asarray(v, dtype=float) for k, v in table.items()}
        self.calls = 0

    @classmethod
    def random(cls, sentences: Sequence[str], dim: int, seed: int, name: str = "fake-encoder") -> FakeEncoder:
        rng = np.random.default_rng(seed)
        e = rng.standard_normal((len(sentences), dim))
        e /= np.linalg.norm(e, axis=1, keepdims=True)
        return cls(dim, dict(zip(sentences, e)), name)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        out = np.empty((len(texts), self.dim))
        for i, t in enumerate(texts):
            if t not in self.table:
                rng = np.random.default_rng(int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "big"))
                v = rng.standard_normal(self.dim)
                self.table[t] = v / np.linalg.norm(v)
            out[i] = self.table[t]
        return out


def install_fake_models(monkeypatch, sentences: list[str], dim: int = 32, seed: int = 3) -> dict[str, list]:
    """Replace the CLI's model loaders by a ``dim``-d fake encoder and a sampler over ``sentences``.

    Returns the calls made to each loader (``{"encoder": [...], "sampler": [...]}``), so a test can assert
    that bad input is refused before any model loads.
    """
    from pmark_impl.cli import models

    encoder = FakeEncoder.random(sentences, dim, seed=seed)
    calls: dict[str, list] = {"encoder": [], "sampler": []}

    def load_encoder(name):
        calls["encoder"].append(name)
        return encoder

    def load_sampler(model, temperature, top_p):
        calls["sampler"].append(model)
        return FakeSampler(sentences)

    monkeypatch.setattr(models, "load_encoder", load_encoder)
    monkeypatch.setattr(models, "load_sampler", load_sampler)
    return calls


def cell_function(key, mode: str, lsh_dim: int, n_clusters: int):
    """``(cell_fn, M)`` of a cell scheme for ``key``, through the scheme's own ``init`` (as generation builds it)."""
    from pmark_impl.schemes import Setup, get_scheme, resolve_settings

    scheme = get_scheme(mode)
    size = (
        {"lsh_dim": lsh_dim} if "lsh_dim" in {o.name for o in scheme.options} else {"n_clusters": n_clusters}
    )
    settings = resolve_settings(scheme, size, key=key)
    state = scheme.init(Setup(key, None, "", 1, 1, settings))
    return state.cell_fn, state.n_cells
