"""The watermark key: a 32-byte secret and everything derived from it by a keyed PRF (docs/architecture.md "The watermark key", C10, E13, E18).

Every random object of the scheme is derived from the secret with HMAC-SHA256 under a distinct label, so the
objects are (computationally) independent of each other and of the text:

  * ``"pivots"``: seed of the Haar pivots ``V = haar_pivots(seed, d, b)`` ``[b, d]`` (E18);
  * ``"bits/{t}"``: the channel bits ``r_(t, j)``, ``j = 1..b``, of sentence position ``t`` — a keyed PRF of
    the position only, never of the text, so for any fixed text the bits are iid ``Bern(½)`` over keys and the
    hard count is exactly ``Binomial(bT, ½)`` (X3) — the default ``seeding = "position"``;
  * ``"seeds/zeta"``: with ``seeding = "context"`` (Z1–Z4), ``b`` seed vectors ``ζ`` uniform in the orthogonal
    complement of the pivots (``pmark_theory._seeds.complement_frame``): the bits of sentence ``t >= 1`` are
    ``1{<ζ_i, mean of the w previous embeddings> > 0}``, so deleting a sentence breaks one position, not all
    later ones; the hard count is then no longer exactly binomial (Z3), and detection uses the
    key-resampling p-value;
  * ``"generate/{seed}/{t}/…"``: sampling and tie-break/choice randomness of generation (separate labels, so
    independent of the bits; a user ``seed`` makes runs reproducible);
  * ``"green/…"`` (``"green-cell/…"``: seeded by the previous sentence's cell): green sets of the cell schemes;
  * each scheme derives its own material under its own label with :meth:`WatermarkKey.numpy_rng` (SemStamp's
    LSH normals, the k-means variant's random centroids: :mod:`pmark_impl.schemes`). The key stores fitted
    centroids when it has them (spherical k-means on a corpus, :mod:`pmark_impl.keys._centroids`, ``pmark keygen
    --centroid-corpus``).

Key files (:mod:`pmark_impl.keys._key_files`) are JSON, written atomically with mode 0600 and never pickled. The
secret never appears in ``repr``, logs or errors.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from pmark_impl.keys._calibration import KeyCalibration
from pmark_impl.keys._cell_calibration import CellCalibration, check_distinct
from pmark_impl.keys._centroids import KeyCentroids
from pmark_impl.keys._key_fields import (
    KEY_FORMAT,
    KEY_VERSION,
    MAX_ENCODER_NAME,
    MAX_KEY_CHANNELS,
    MAX_KEY_DIM,
    MAX_SEED_WINDOW,
    SECRET_BYTES,
    KeyFileError,
    check_encoder_name,
    check_key_shape,
    check_seeding,
)
from pmark_impl.keys._text_nulls import KeyTextNull, check_distinct_nulls
from pmark_theory._geometry import haar_pivots
from pmark_theory._validate import PMarkValueError, check_bits, check_positive_int

__all__ = [
    "KEY_FORMAT",
    "KEY_VERSION",
    "MAX_ENCODER_NAME",
    "MAX_KEY_CHANNELS",
    "MAX_KEY_DIM",
    "MAX_SEED_WINDOW",
    "SECRET_BYTES",
    "KeyFileError",
    "WatermarkKey",
    "check_key",
    "check_key_shape",
]


@dataclass(frozen=True, eq=False, repr=False)
class WatermarkKey:
    """A PMark watermark key (docs/architecture.md "The watermark key").

    Attributes:
      secret: 32 secret bytes. Never printed: ``repr`` shows a fingerprint instead.
      encoder: name of the sentence encoder the key was made for: a non-empty printable string of at most
        1024 characters (:func:`pmark_impl.keys._key_fields.check_encoder_name`, the key file's own rule).
      dim: embedding dimension ``d`` of that encoder.
      channels: number of channels ``b`` (``1 <= b <= d``).
      calibration: the proxy centre and per-channel null sign counts from a human corpus (K1), or ``None``
        (uncentred proxies, the paper's rule; the key-averaged binomial test only).
      seeding: ``"position"`` (default, the paper) or ``"context"`` (Z1–Z4; needs ``2b <= d``).
      seed_window: ``w`` in ``1..64``, the previous sentences whose mean embedding seeds the bits (context
        seeding).
      fitted_centroids: k-SemStamp centroids fitted on a corpus (:class:`pmark_impl.keys._centroids.KeyCentroids`,
        E2), or ``None`` (:meth:`centroids` derives random ones from the secret).
      cell_calibrations: the cell masses of SemStamp-style cell maps on human text, at most one per cell map
        (:class:`pmark_impl.keys._cell_calibration.CellCalibration`, K1): detection-only, so they do not change
        the fingerprint (a text generated before the key was calibrated is still detected with it).
      text_nulls: the detector's raw p-values on whole human texts by length, one per scheme, test and detection
        settings (:class:`pmark_impl.keys._text_nulls.KeyTextNull`, K3): the per-key p-value that holds whatever
        the dependence between a text's sentences. Detection-only, like ``cell_calibrations``.
    """

    secret: bytes
    encoder: str
    dim: int
    channels: int
    calibration: KeyCalibration | None = None
    seeding: str = "position"
    seed_window: int = 1
    fitted_centroids: KeyCentroids | None = None
    cell_calibrations: tuple[CellCalibration, ...] = ()
    text_nulls: tuple[KeyTextNull, ...] = ()

    def __post_init__(self) -> None:
        # The field rules are the key file's own (pmark_impl.keys._key_fields): one function per field, shared by this
        # constructor, save_key and load_key, so a key made here is a key that can be written and read back.
        if not isinstance(self.secret, bytes) or len(self.secret) != SECRET_BYTES:
            raise PMarkValueError(f"secret must be exactly {SECRET_BYTES} bytes")
        check_encoder_name(self.encoder)
        dim = check_positive_int("dim", self.dim)
        channels = check_bits(self.channels, dim)
        object.__setattr__(self, "dim", dim)
        object.__setattr__(self, "channels", channels)
        cal = self.calibration
        if cal is not None and (
            not isinstance(cal, KeyCalibration) or (cal.dim, cal.channels) != (dim, channels)
        ):
            raise PMarkValueError(
                f"calibration must be a KeyCalibration for d = {dim}, b = {channels}"
                + (f", got d = {cal.dim}, b = {cal.channels}" if isinstance(cal, KeyCalibration) else "")
            )
        check_seeding(self.seeding, self.seed_window)
        if self.seeding == "context" and 2 * channels > dim:
            raise PMarkValueError(
                f"context seeding needs 2b <= d (b seed vectors beside b pivots), got b = {channels}, d = {dim}"
            )
        fc = self.fitted_centroids
        if fc is not None and (not isinstance(fc, KeyCentroids) or fc.dim != dim):
            raise PMarkValueError(
                f"fitted_centroids must be KeyCentroids of dimension d = {dim}"
                + (f", got d = {fc.dim}" if isinstance(fc, KeyCentroids) else "")
            )
        if not isinstance(self.cell_calibrations, (tuple, list)):
            raise PMarkValueError("cell_calibrations must be a tuple of CellCalibration")
        object.__setattr__(self, "cell_calibrations", check_distinct(self.cell_calibrations))
        object.__setattr__(self, "text_nulls", check_distinct_nulls(self.text_nulls))

    # ----------------------------------------------------------------------------------------------------------
    @classmethod
    def generate(
        cls, rng: np.random.Generator | None, encoder: str, dim: int, channels: int = 4
    ) -> WatermarkKey:
        """A fresh key.

        Args:
          rng: ``np.random.Generator`` for reproducible keys (tests, simulations); ``None`` uses the OS CSPRNG
            (``secrets.token_bytes``), which is what real keys must use.
          encoder: the encoder's name.
          dim: the encoder's dimension ``d``.
          channels: ``b``, ``1 <= b <= d``.

        Returns:
          A new :class:`WatermarkKey`.
        """
        if rng is not None and not isinstance(rng, np.random.Generator):
            raise PMarkValueError(
                f"rng must be a numpy.random.Generator or None (the OS CSPRNG), got {type(rng).__name__}"
            )
        secret = secrets.token_bytes(SECRET_BYTES) if rng is None else rng.bytes(SECRET_BYTES)
        return cls(secret=secret, encoder=encoder, dim=dim, channels=channels)

    def __repr__(self) -> str:
        return (
            f"WatermarkKey(encoder={self.encoder!r}, dim={self.dim}, channels={self.channels}, "
            f"fingerprint={self.fingerprint!r}, centring={self.centring!r}, seeding={self.seeding!r}, "
            "secret=<redacted>)"
        )

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, WatermarkKey):
            return NotImplemented
        return hmac.compare_digest(self.secret, other.secret) and (
            self.encoder,
            self.dim,
            self.channels,
            self.calibration,
            self.seeding,
            self.seed_window,
            self.fitted_centroids,
            set(self.cell_calibrations),
            {n.ident: n for n in self.text_nulls},
        ) == (
            other.encoder,
            other.dim,
            other.channels,
            other.calibration,
            other.seeding,
            other.seed_window,
            other.fitted_centroids,
            set(other.cell_calibrations),
            {n.ident: n for n in other.text_nulls},
        )

    def __hash__(self) -> int:
        return hash((self.fingerprint, self.encoder, self.dim, self.channels))

    def __reduce__(self) -> Any:
        raise TypeError("WatermarkKey is not picklable; use save_key/load_key (JSON)")

    # ----------------------------------------------------------------------------------------------------------
    def prf(self, label: str, n_bytes: int = 32) -> bytes:
        """``n_bytes`` pseudo-random bytes for ``label``: HMAC-SHA256(secret, label) in counter mode.

        Block 0 is ``HMAC(secret, label)``; block ``k >= 1`` is ``HMAC(secret, f"{label}/{k}")``.
        """
        out = bytearray()
        k = 0
        while len(out) < n_bytes:
            msg = label if k == 0 else f"{label}/{k}"
            out += hmac.new(self.secret, msg.encode("utf-8"), hashlib.sha256).digest()
            k += 1
        return bytes(out[:n_bytes])

    def derive_seed(self, label: str) -> int:
        """A 63-bit integer seed for ``label`` (for ``torch.Generator``, ``jax.random.key``, NumPy)."""
        return int.from_bytes(self.prf(label, 8), "big") >> 1

    def numpy_rng(self, label: str) -> np.random.Generator:
        """A NumPy generator seeded with the full 256-bit PRF output for ``label``."""
        return np.random.default_rng(int.from_bytes(self.prf(label), "big"))

    @property
    def fingerprint(self) -> str:
        """A short public identifier of the key as used: 16 hex digits of ``HMAC(secret, "fingerprint")``, or of
        ``HMAC(secret, "fingerprint/<calibration digest>")`` for a calibrated key (K1); context seeding appends
        ``"/seeds/<mode>/<w>"`` and stored centroids ``"/centroids/<digest>"`` (E2)."""
        label = "fingerprint"
        if self.calibration is not None:
            label += f"/{self.calibration.digest}"
        if self.seeding != "position":
            label += f"/seeds/{self.seeding}/{self.seed_window}"
        if self.fitted_centroids is not None:
            label += f"/centroids/{self.fitted_centroids.digest}"
        return self.prf(label, 8).hex()

    @property
    def centring(self) -> str:
        """The proxy centring rule: the calibration's, or ``"none"`` (:mod:`pmark_theory._centring`)."""
        return "none" if self.calibration is None else self.calibration.centring

    @property
    def centre(self) -> np.ndarray:
        """``[d]`` the reference mean ``μ`` of the calibration (zeros without one)."""
        return np.zeros(self.dim) if self.calibration is None else self.calibration.centre

    def with_calibration(self, calibration: KeyCalibration | None) -> WatermarkKey:
        """The same secret with ``calibration`` (``None`` removes it)."""
        return replace(self, calibration=calibration)

    def with_centroids(self, centroids: KeyCentroids | None) -> WatermarkKey:
        """The same secret with stored k-SemStamp ``centroids`` (``None`` removes them; see
        :func:`pmark_impl.keys._centroids.fit_key_centroids` to fit them on a corpus)."""
        return replace(self, fitted_centroids=centroids)

    def with_cell_calibration(self, calibration: CellCalibration) -> WatermarkKey:
        """The same key with ``calibration`` replacing any of the same cell map (K1, cell masses)."""
        rest = tuple(c for c in self.cell_calibrations if c.identity != calibration.identity)
        return replace(self, cell_calibrations=(*rest, calibration))

    def with_text_null(self, null: KeyTextNull) -> WatermarkKey:
        """The same key with ``null`` replacing any of the same scheme, test and settings (K3)."""
        rest = tuple(n for n in self.text_nulls if n.ident != null.ident)
        return replace(self, text_nulls=(*rest, null))

    def without_text_nulls(self) -> WatermarkKey:
        """The same key with no text-level null (what the detector's raw p-values are computed with)."""
        return replace(self, text_nulls=())

    def text_null(self, scheme: str, test: str, signature: str) -> KeyTextNull | None:
        """The stored text-level null of ``(scheme, test, signature)``, or ``None`` (K3)."""
        return next((n for n in self.text_nulls if n.ident == (scheme, test, signature)), None)

    def cell_calibration(self, scheme: str, size_option: str, size: int) -> CellCalibration | None:
        """The stored cell calibration of the cell map ``(scheme, size_option, size)``, or ``None``."""
        return next(
            (c for c in self.cell_calibrations if c.identity == (scheme, size_option, int(size))), None
        )

    # ----------------------------------------------------------------------------------------------------------
    def pivots(self) -> np.ndarray:
        """Haar pivots ``V`` float64 ``[b, d]`` with orthonormal rows (E18), seeded by ``HMAC(secret, "pivots")``.

        Any ``b' <= b`` first rows are again Haar pivots, so ``pivots()[:b']`` serves fewer channels.
        """
        return np.array(_cached_pivots(self.secret, self.dim, self.channels))

    def bits(self, t: int) -> np.ndarray:
        """Channel bits ``r_(t, j)``, int32 ``[b]`` in ``{0, 1}``, of sentence position ``t >= 0`` (C10, X3).

        The first ``b`` bits (most significant first) of ``HMAC(secret, f"bits/{t}")`` (counter mode past 256).
        """
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 0:
            raise PMarkValueError(f"t (sentence position) must be an integer >= 0, got {t!r}")
        raw = np.frombuffer(self.prf(f"bits/{int(t)}", (self.channels + 7) // 8), dtype=np.uint8)
        return np.unpackbits(raw)[: self.channels].astype(np.int32)

    def seed_vectors(self, b: int | None = None) -> np.ndarray:
        """``ζ`` float64 ``[b, d]``: orthonormal, orthogonal to all the key's pivots, jointly Haar with them (Z1)."""
        b = self.channels if b is None else b
        return np.array(_cached_seed_vectors(self.secret, self.dim, self.channels))[:b]

    def text_bits(self, embeddings: np.ndarray, b: int | None = None) -> np.ndarray:
        """The bits ``[T, b]`` of a text's sentences under this key's seeding (positional, or context: Z1).

        Args:
          embeddings: ``[T, d]`` the text's sentence embeddings in order (unused by positional seeding).
          b: channels used (default all).
        """
        b = self.channels if b is None else b
        emb = np.asarray(embeddings, dtype=np.float64).reshape(-1, self.dim)
        if self.seeding == "position":
            return self.bits_matrix(emb.shape[0])[:, :b]
        from pmark_theory._seeds import context_seed_bits

        return np.asarray(context_seed_bits(self.seed_vectors(b), emb, self.seed_window, self.bits(0)[:b]))

    def step_bits(self, t: int, previous: np.ndarray, b: int | None = None) -> np.ndarray:
        """The bits ``[b]`` of sentence ``t`` given the embeddings ``[t, d]`` of the sentences before it.

        Equal to ``text_bits(E)[t]`` for any ``E`` whose first ``t`` rows are ``previous`` (generation uses
        this, detection :meth:`text_bits`).
        """
        b = self.channels if b is None else b
        if self.seeding == "position" or t == 0:
            return self.bits(t)[:b]
        prev = np.asarray(previous, dtype=np.float64).reshape(-1, self.dim)
        return self.text_bits(np.vstack([prev, np.zeros((1, self.dim))]), b)[-1]

    def bits_matrix(self, n_positions: int) -> np.ndarray:
        """``r_(t, j)`` for ``t = 0..T-1``: int32 ``[T, b]`` (``T = 0`` gives ``[0, b]``)."""
        n = check_positive_int("n_positions", n_positions, minimum=0)
        return np.array([self.bits(t) for t in range(n)], dtype=np.int32).reshape(n, self.channels)

    @property
    def default_n_clusters(self) -> int:
        """k-SemStamp's ``k`` when none is given: the ``k`` of the fitted centroids, else 8 (random centroids)."""
        return 8 if self.fitted_centroids is None else int(self.fitted_centroids.k)

    def green_set(self, t: int, n_cells: int, g: int) -> np.ndarray:
        """Green set of position ``t``: a uniform ``g``-subset of ``n_cells`` cells, bool ``[M]`` (C5).

        Drawn by ``pmark_theory.random_green_set`` with a JAX key from ``HMAC(secret, f"green/{M}/{g}/{t}")``:
        independent of the text, fixed for all retries at ``t`` (E3).
        """
        import jax

        key = jax.random.key(self.derive_seed(f"green/{n_cells}/{g}/{t}"))
        return np.asarray(_jitted_green_set()(key, int(n_cells), int(g)))

    def green_set_for_cell(self, cell: int, n_cells: int, g: int) -> np.ndarray:
        """Green set seeded by the PREVIOUS sentence's cell (the SemStamp / k-SemStamp reference code), bool ``[M]``.

        Same rule as :meth:`green_set` (a uniform ``g``-subset, ``pmark_theory.random_green_set``) with a JAX key
        from ``HMAC(secret, f"green-cell/{M}/{g}/{cell}")``: a function of the key and ``cell`` only, not of the
        position (``green_seeding = "cell"``; sentence 0 keeps ``green_set(0, ...)``).
        """
        import jax

        if isinstance(cell, bool) or not isinstance(cell, (int, np.integer)) or not 0 <= cell < n_cells:
            raise PMarkValueError(f"cell must be an integer in 0..{n_cells - 1}, got {cell!r}")
        key = jax.random.key(self.derive_seed(f"green-cell/{n_cells}/{g}/{int(cell)}"))
        return np.asarray(_jitted_green_set()(key, int(n_cells), int(g)))


@functools.cache
def _jitted_green_set() -> Any:
    import jax

    from pmark_theory._cell_rules import random_green_set

    return jax.jit(random_green_set, static_argnums=(1, 2))


@functools.lru_cache(maxsize=32)
def _cached_seed_vectors(secret: bytes, dim: int, channels: int) -> np.ndarray:
    import jax

    from pmark_theory._seeds import complement_frame

    seed = int.from_bytes(hmac.new(secret, b"seeds/zeta", hashlib.sha256).digest()[:8], "big") >> 1
    z = np.asarray(complement_frame(jax.random.key(seed), _cached_pivots(secret, dim, channels), channels))
    z.setflags(write=False)
    return z


@functools.lru_cache(maxsize=32)
def _cached_pivots(secret: bytes, dim: int, channels: int) -> np.ndarray:
    seed = int.from_bytes(hmac.new(secret, b"pivots", hashlib.sha256).digest(), "big")
    v = haar_pivots(np.random.default_rng(seed), dim, channels)
    v.setflags(write=False)
    return v


def check_key(key: Any, name: str = "key") -> WatermarkKey:
    """``key`` if it is a :class:`WatermarkKey` (a path is refused with how to load it)."""
    from pmark_impl.sampling import describe

    if isinstance(key, WatermarkKey):
        return key
    hint = ""
    if isinstance(key, (str, bytes)) or hasattr(key, "__fspath__"):
        hint = " (load a key file with pmark_impl.load_key(path))"
    raise PMarkValueError(f"{name} must be a WatermarkKey, got {describe(key)}{hint}")
