"""The watermark key: a 32-byte secret, its keyed PRF, and the calibrations stored with it (docs/architecture.md
"The watermark key", C10, E13, E18).

Every random object of a scheme is derived from the secret with HMAC-SHA256 (:meth:`WatermarkKey.prf`,
:meth:`~WatermarkKey.derive_seed`, :meth:`~WatermarkKey.numpy_rng`) under a distinct label, so the objects are
(computationally) independent of each other and of the text. Each scheme owns its labels and what it derives
(issue 37): PMark's pivots, channel bits and context seeds (``"pivots"``, ``"bits/{t}"``, ``"seeds/zeta"``:
:mod:`pmark_impl.schemes.pmark_key`), the cell schemes' green sets (``"green/…"``, ``"green-cell/…"``:
:mod:`pmark_impl.schemes.cell_key`), SemStamp's LSH normals and k-SemStamp's random centroids (their scheme
modules), generation's sampling randomness (``"generate/{seed}/{t}/…"``), a plug-in's own labels. The key holds
what is not derived but measured and stored in its file: PMark's proxy centre (``calibration``, K1) and seeding
(``seeding``, Z1), k-SemStamp's fitted centroids (``fitted_centroids``), the cell schemes' cell masses
(``cell_calibrations``) and every scheme's text-level nulls (``text_nulls``, K3) — data the keys layer stores and
checks, and whose meaning each scheme gives.

Key files (:mod:`pmark_impl.keys._key_files`) are JSON, written atomically with mode 0600 and never pickled. The
secret never appears in ``repr``, logs or errors.
"""

from __future__ import annotations

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


def check_key(key: Any, name: str = "key") -> WatermarkKey:
    """``key`` if it is a :class:`WatermarkKey` (a path is refused with how to load it)."""
    from pmark_impl.sampling import describe

    if isinstance(key, WatermarkKey):
        return key
    hint = ""
    if isinstance(key, (str, bytes)) or hasattr(key, "__fspath__"):
        hint = " (load a key file with pmark_impl.load_key(path))"
    raise PMarkValueError(f"{name} must be a WatermarkKey, got {describe(key)}{hint}")
