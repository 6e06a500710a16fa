"""The watermark key: a 32-byte secret and everything derived from it by a keyed PRF (DESIGN.md, C10, E13, E18).

Every random object of the scheme is derived from the secret with HMAC-SHA256 under a distinct label, so the
objects are (computationally) independent of each other and of the text:

  * ``"pivots"``: seed of the Haar pivots ``V = haar_pivots(seed, d, b)`` ``[b, d]`` (E18);
  * ``"bits/{t}"``: the channel bits ``r_(t, j)``, ``j = 1..b``, of sentence position ``t`` — a keyed PRF of
    the position only, never of the text, so for any fixed text the bits are iid ``Bern(½)`` over keys and the
    hard count is exactly ``Binomial(bT, ½)`` (X3; context-derived seeds would break this, E13);
  * ``"generate/{seed}/{t}/…"``: sampling and tie-break/choice randomness of generation (separate labels, so
    independent of the bits; a user ``seed`` makes runs reproducible);
  * ``"semstamp/…"``, ``"ksemstamp/…"``, ``"green/…"``: LSH normals, centroids and green sets of the baselines.

Key files are JSON ``{"format": "pmark-key", "version": 1, "encoder", "dim", "channels", "secret": hex}``
(version 2 adds ``"calibration"``: the proxy centre and per-channel null sign counts, K1, ``pmark calibrate``),
written atomically with mode 0600 and never pickled; a file that group or others may read is refused on load
(unless ``allow_insecure=True``). The secret never appears in ``repr``, logs or errors.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
import secrets
import stat
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from pmark_impl._calibration import KeyCalibration, calibration_from_json
from pmark_theory._files import UserFileError, read_bounded, write_atomic
from pmark_theory._geometry import haar_pivots
from pmark_theory._validate import PMarkValueError, check_bits, check_positive_int

__all__ = [
    "KEY_FORMAT",
    "KEY_VERSION",
    "MAX_KEY_CHANNELS",
    "MAX_KEY_DIM",
    "SECRET_BYTES",
    "KeyFileError",
    "WatermarkKey",
    "check_key_shape",
    "load_key",
    "save_key",
]

KEY_FORMAT = "pmark-key"
KEY_VERSION = 2
#: Versions this pmark reads (1: no calibration).
KEY_VERSIONS = (1, 2)
SECRET_BYTES = 32
#: Key files are small (a calibrated key holds a ``d``-vector: ~25 bytes per entry); anything larger is not a key
#: file (guards against reading a huge file by mistake).
_MAX_KEY_FILE_BYTES = 1 << 21
#: Bounds of a key *file* (:func:`check_key_shape`): encoder dimension ``d`` and channels ``b``.
MAX_KEY_DIM = 1 << 16
MAX_KEY_CHANNELS = 64


class KeyFileError(ValueError):
    """A key file is missing, unreadable, corrupt, of another format/version, or does not fit the encoder."""


@dataclass(frozen=True, eq=False, repr=False)
class WatermarkKey:
    """A PMark watermark key (DESIGN.md "The watermark key").

    Attributes:
      secret: 32 secret bytes. Never printed: ``repr`` shows a fingerprint instead.
      encoder: name of the sentence encoder the key was made for.
      dim: embedding dimension ``d`` of that encoder.
      channels: number of channels ``b`` (``1 <= b <= d``).
      calibration: the proxy centre and per-channel null sign counts from a human corpus (K1), or ``None``
        (uncentred proxies, the paper's rule; the key-averaged binomial test only).
    """

    secret: bytes
    encoder: str
    dim: int
    channels: int
    calibration: KeyCalibration | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.secret, bytes) or len(self.secret) != SECRET_BYTES:
            raise PMarkValueError(f"secret must be exactly {SECRET_BYTES} bytes")
        if not isinstance(self.encoder, str) or not self.encoder:
            raise PMarkValueError("encoder must be a non-empty string (the encoder's name)")
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
        secret = secrets.token_bytes(SECRET_BYTES) if rng is None else rng.bytes(SECRET_BYTES)
        return cls(secret=secret, encoder=encoder, dim=dim, channels=channels)

    def __repr__(self) -> str:
        return (
            f"WatermarkKey(encoder={self.encoder!r}, dim={self.dim}, channels={self.channels}, "
            f"fingerprint={self.fingerprint!r}, centring={self.centring!r}, secret=<redacted>)"
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
        ) == (other.encoder, other.dim, other.channels, other.calibration)

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
        ``HMAC(secret, "fingerprint/<calibration digest>")`` for a calibrated key (K1)."""
        if self.calibration is None:
            return self.prf("fingerprint", 8).hex()
        return self.prf(f"fingerprint/{self.calibration.digest}", 8).hex()

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

    def bits_matrix(self, n_positions: int) -> np.ndarray:
        """``r_(t, j)`` for ``t = 0..T-1``: int32 ``[T, b]`` (``T = 0`` gives ``[0, b]``)."""
        n = check_positive_int("n_positions", n_positions, minimum=0)
        return np.array([self.bits(t) for t in range(n)], dtype=np.int32).reshape(n, self.channels)

    def lsh_hyperplanes(self, h: int) -> np.ndarray:
        """SemStamp LSH normals float64 ``[h, d]`` (iid Gaussian), from ``HMAC(secret, "semstamp/hyperplanes/h")``."""
        h = check_positive_int("lsh_dim", h)
        return self.numpy_rng(f"semstamp/hyperplanes/{h}").standard_normal((h, self.dim))

    def centroids(self, k: int) -> np.ndarray:
        """k-SemStamp centroids float64 ``[k, d]``: unit vectors uniform on the sphere, derived from the key.

        A stand-in for k-means centroids of domain data (k-SemStamp fits them on a corpus); the cells are the
        Voronoi cells of these points under cosine similarity.
        """
        k = check_positive_int("n_clusters", k, minimum=2)
        c = self.numpy_rng(f"ksemstamp/centroids/{k}").standard_normal((k, self.dim))
        return c / np.linalg.norm(c, axis=1, keepdims=True)

    def green_set(self, t: int, n_cells: int, g: int) -> np.ndarray:
        """Green set of position ``t``: a uniform ``g``-subset of ``n_cells`` cells, bool ``[M]`` (C5).

        Drawn by ``pmark_theory.random_green_set`` with a JAX key from ``HMAC(secret, f"green/{M}/{g}/{t}")``:
        independent of the text, fixed for all retries at ``t`` (E3).
        """
        import jax

        key = jax.random.key(self.derive_seed(f"green/{n_cells}/{g}/{t}"))
        return np.asarray(_jitted_green_set()(key, int(n_cells), int(g)))


@functools.cache
def _jitted_green_set() -> Any:
    import jax

    from pmark_theory._cell_rules import random_green_set

    return jax.jit(random_green_set, static_argnums=(1, 2))


@functools.lru_cache(maxsize=32)
def _cached_pivots(secret: bytes, dim: int, channels: int) -> np.ndarray:
    seed = int.from_bytes(hmac.new(secret, b"pivots", hashlib.sha256).digest(), "big")
    v = haar_pivots(np.random.default_rng(seed), dim, channels)
    v.setflags(write=False)
    return v


# --------------------------------------------------------------------------------------------------------------
# Key files.
# --------------------------------------------------------------------------------------------------------------
def check_key_shape(dim: Any, channels: Any) -> tuple[int, int]:
    """Check the shape of a key that goes to or comes from a file: ``1 <= d <= 65536``, ``1 <= b <= min(d, 64)``.

    In-memory keys (:class:`WatermarkKey`) only need ``1 <= b <= d``; a key *file* is bounded so that a typo
    (``--dim 10**12``) cannot produce a key that no encoder or sampler can ever use (online mode needs
    ``N >= 2**b`` candidates per sentence).

    Raises:
      PMarkValueError: ``dim`` or ``channels`` is not an integer (bools are refused) or out of range.
    """
    dim = check_positive_int("dim", dim)
    if dim > MAX_KEY_DIM:
        raise PMarkValueError(f"dim must be an integer in 1..{MAX_KEY_DIM}, got {dim}")
    channels = check_bits(channels, dim)
    if channels > MAX_KEY_CHANNELS:
        raise PMarkValueError(f"b (channels) must be an integer in 1..{MAX_KEY_CHANNELS}, got {channels}")
    return dim, channels


def _key_to_json(key: WatermarkKey) -> str:
    doc: dict[str, Any] = {
        "format": KEY_FORMAT,
        "version": 1 if key.calibration is None else KEY_VERSION,
        "encoder": key.encoder,
        "dim": key.dim,
        "channels": key.channels,
        "secret": key.secret.hex(),
    }
    if key.calibration is not None:
        doc["calibration"] = key.calibration.to_json_dict()
    return json.dumps(doc, indent=2) + "\n"


def save_key(key: WatermarkKey, path: str | os.PathLike[str], *, force: bool = False) -> Path:
    """Write ``key`` as a JSON key file, atomically, readable by the owner only (mode 0600).

    The file is written to a temporary file in the same folder and moved into place, so a crash never leaves
    a half-written key. Without ``force`` an existing file is never replaced (the move is a hard link, which
    fails if the target exists); with ``force`` only a regular file is replaced — a device node, FIFO,
    directory or symbolic link never is.

    Args:
      key: the key (its shape must pass :func:`check_key_shape`).
      path: destination.
      force: replace an existing regular file.

    Returns:
      The path written.

    Raises:
      FileExistsError: ``path`` exists and ``force`` is false.
      KeyFileError: ``path`` exists and is not a regular file, its folder does not exist, or the key's shape
        is out of the key-file bounds.
      OSError: the folder is not writable.
    """
    try:
        check_key_shape(key.dim, key.channels)
    except PMarkValueError as exc:
        raise KeyFileError(f"cannot write key file {path}: {exc}") from None
    try:
        return write_atomic(path, _key_to_json(key).encode("utf-8"), force=force, mode=0o600, what="key file")
    except UserFileError as exc:
        raise KeyFileError(str(exc)) from None


_FIELDS = ("format", "version", "encoder", "dim", "channels", "secret")
_MAX_ENCODER_NAME = 1024
_HEX = frozenset("0123456789abcdefABCDEF")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a valid JSON number")


def _field(doc: dict, name: str, kind: type, path: Path) -> Any:
    if name not in doc:
        raise KeyFileError(f"key file {path} is missing the field {name!r}")
    value = doc[name]
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise KeyFileError(f"key file {path}: field {name!r} must be an integer, got {type(value).__name__}")
    if kind is str and not isinstance(value, str):
        raise KeyFileError(f"key file {path}: field {name!r} must be a string, got {type(value).__name__}")
    return value


def _parse_key_document(raw: bytes, path: Path) -> dict:
    try:
        text = raw.decode("utf-8-sig")  # a leading UTF-8 byte-order mark is accepted
    except UnicodeDecodeError as exc:
        raise KeyFileError(
            f"key file {path} is corrupt (not UTF-8 text: invalid byte at offset {exc.start})"
        ) from None
    if not text.strip():
        raise KeyFileError(f"key file {path} is empty")
    try:
        doc = json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise KeyFileError(
            f"key file {path} is corrupt (invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except RecursionError:
        raise KeyFileError(f"key file {path} is corrupt (JSON nested too deeply)") from None
    except ValueError as exc:  # NaN/Infinity, or an integer of more than 4300 digits
        raise KeyFileError(f"key file {path} is corrupt ({str(exc).split(':')[0]})") from None
    if not isinstance(doc, dict) or doc.get("format") != KEY_FORMAT:
        raise KeyFileError(f'{path} is not a PMark key file (expected "format": "{KEY_FORMAT}")')
    version = doc.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version not in KEY_VERSIONS:
        shown = repr(version) if len(repr(version)) <= 40 else f"{repr(version)[:37]}..."
        raise KeyFileError(
            f"key file {path} has unsupported version {shown} (this pmark reads versions {', '.join(map(str, KEY_VERSIONS))})"
        )
    fields = _FIELDS + (("calibration",) if version >= 2 else ())
    unknown = sorted(str(k)[:40] for k in doc if k not in fields)
    if unknown:
        raise KeyFileError(f"key file {path} has unknown field(s) {', '.join(map(repr, unknown[:5]))}")
    return doc


def load_key(
    path: str | os.PathLike[str], expected_dim: int | None = None, *, allow_insecure: bool = False
) -> WatermarkKey:
    """Read a JSON key file written by :func:`save_key`.

    At most 2 MiB are read, only from a regular file (symbolic links resolved); the document must have
    exactly the fields ``format`` (``"pmark-key"``), ``version`` (1), ``encoder`` (a printable string),
    ``dim`` and ``channels`` (integers, not bools, within :func:`check_key_shape`) and ``secret``
    (64 hexadecimal digits). A leading UTF-8 byte-order mark is accepted; ``NaN``/``Infinity`` are not.

    Args:
      path: the key file.
      expected_dim: the dimension of the encoder that will be used; a different ``dim`` in the file raises.
      allow_insecure: accept a key file that group or others may access (mode ``& 0o077 != 0``). By default
        such a file is refused: the secret may already be known to other users (fix: ``chmod 600 KEY``).

    Returns:
      The key.

    Raises:
      KeyFileError: the file is missing or unreadable, not a regular file, too large, not valid UTF-8 JSON,
        not a ``pmark-key`` file, of an unsupported version, has a malformed secret or fields, its ``dim``
        differs from ``expected_dim``, or it is accessible by group/others without ``allow_insecure``.
        Messages never contain the secret.
    """
    path = Path(path)
    raw, st = read_bounded(path, limit=_MAX_KEY_FILE_BYTES, what="key file", error=KeyFileError)
    doc = _parse_key_document(raw, path)
    encoder = _field(doc, "encoder", str, path)
    if not encoder or len(encoder) > _MAX_ENCODER_NAME or not encoder.isprintable():
        raise KeyFileError(
            f"key file {path}: field 'encoder' must be a non-empty printable string of at most "
            f"{_MAX_ENCODER_NAME} characters"
        )
    dim = _field(doc, "dim", int, path)
    channels = _field(doc, "channels", int, path)
    try:
        dim, channels = check_key_shape(dim, channels)
    except PMarkValueError as exc:
        raise KeyFileError(f"key file {path} is invalid: {exc}") from None
    secret_hex = _field(doc, "secret", str, path)
    if len(secret_hex) != 2 * SECRET_BYTES:
        raise KeyFileError(f"key file {path}: the secret must be {2 * SECRET_BYTES} hexadecimal digits")
    if not _HEX.issuperset(secret_hex):
        raise KeyFileError(f"key file {path}: the secret is not hexadecimal")
    try:
        cal = None if "calibration" not in doc else calibration_from_json(doc["calibration"], dim, channels)
        key = WatermarkKey(
            secret=bytes.fromhex(secret_hex), encoder=encoder, dim=dim, channels=channels, calibration=cal
        )
    except (PMarkValueError, ValueError) as exc:
        raise KeyFileError(f"key file {path} is invalid: {exc}") from None
    if expected_dim is not None and key.dim != expected_dim:
        raise KeyFileError(
            f"key file {path} was made for a {key.dim}-dimensional encoder ({key.encoder!r}), "
            f"but the encoder in use has dimension {expected_dim}"
        )
    if os.name == "posix" and st.st_mode & 0o077 and not allow_insecure:
        raise KeyFileError(
            f"key file {path} is accessible by group or others (mode {stat.S_IMODE(st.st_mode):04o}); "
            f"its secret may be known to other users: run chmod 600 {path}, or pass --allow-insecure-key "
            "(allow_insecure=True) to use it anyway"
        )
    return key
