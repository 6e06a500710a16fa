"""Sentence encoder ``T``: texts → unit vectors in ``R^d`` (float64), one batched call per step.

PMark's proxies are ``F_j(s) = <T(s), v_j>`` with Haar pivots ``v_j`` (C10, C11); C11 and C12 assume ``|T(s)| = 1``.
:class:`Encoder` wraps a sentence-transformers model, encodes a whole list in batches and L2-normalises in float64
(the model computes in float32; the float64 renormalisation makes ``|T(s)| = 1`` to ~1e-15). The model is loaded once
by its owner and passed around (never reloaded per call).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pmark_theory._validate import PMarkValueError, check_positive_int

__all__ = ["Encoder"]


class Encoder:
    """A batched, L2-normalising wrapper around a ``sentence_transformers.SentenceTransformer``.

    Args:
      model: the loaded ``SentenceTransformer`` (any object with ``encode`` and ``get_embedding_dimension`` or
        ``get_sentence_embedding_dimension``).
      name: a label recorded in key files (default: the model's class name).
      batch_size: texts per forward pass (16: measured fastest for MiniLM on short sentences, 2 CPU cores;
        64 ran at 0.67x that rate).

    Raises:
      PMarkValueError: ``model`` has no ``encode`` or dimension method, ``name`` is not a string, or the
        dimension is not a positive integer.

    Attributes:
      name: the label.
      dim: embedding dimension ``d``.
      device: the model's torch device (load it with ``pmark_impl.sampling._models.load_encoder(device=...)``).
    """

    def __init__(self, model: Any, name: str | None = None, *, batch_size: int = 16) -> None:
        get_dim = getattr(model, "get_embedding_dimension", None) or getattr(
            model, "get_sentence_embedding_dimension", None
        )
        if not callable(get_dim) or not callable(getattr(model, "encode", None)):
            raise PMarkValueError(
                "model must be a loaded SentenceTransformer (encode and get_sentence_embedding_dimension), "
                f"got {type(model).__name__}"
            )
        if name is not None and not isinstance(name, str):
            raise PMarkValueError(f"name must be a str or None, got {type(name).__name__}")
        self.model = model
        self.name = name if name is not None else type(model).__name__
        self.batch_size = check_positive_int("batch_size", batch_size)
        self.dim = check_positive_int("the model's embedding dimension", get_dim())

    def __repr__(self) -> str:
        return f"Encoder(name={self.name!r}, dim={self.dim}, device={self.device!r})"

    @property
    def device(self) -> str:
        """The torch device the model computes on (``"cpu"`` for a model that does not say)."""
        return str(getattr(self.model, "device", "cpu"))

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` in batches and L2-normalise each row in float64.

        Args:
          texts: ``n`` strings (``n = 0`` allowed).

        Returns:
          ``[n, dim]`` float64 array with unit rows.

        Raises:
          PMarkValueError: ``texts`` is a bare string or holds a non-string, or the model returns a zero or
            non-finite embedding.
        """
        if isinstance(texts, str) or not isinstance(texts, Sequence):
            raise PMarkValueError(f"texts must be a list of str, got {type(texts).__name__}")
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise PMarkValueError(f"texts[{i}] must be a str, got {type(t).__name__}")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float64)
        emb = self.model.encode(
            texts,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=False,
            show_progress_bar=False,
        )
        emb = np.asarray(emb, dtype=np.float64).reshape(len(texts), self.dim)
        norms = np.linalg.norm(emb, axis=1, keepdims=True)
        if not np.all(np.isfinite(emb)) or np.any(norms == 0):
            raise PMarkValueError(
                "encoder returned a zero or non-finite embedding; texts cannot be normalised"
            )
        return emb / norms
