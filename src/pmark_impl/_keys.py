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

Key files are JSON ``{"format": "pmark-key", "version": 1, "encoder", "dim", "channels", "secret": hex}``,
written atomically with mode 0600 and never pickled. The secret never appears in ``repr``, logs or errors.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import json
import os
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pmark_theory._geometry import haar_pivots
from pmark_theory._validate import PMarkValueError, check_bits, check_positive_int

__all__ = [
    "KEY_FORMAT",
    "KEY_VERSION",
    "SECRET_BYTES",
    "KeyFileError",
    "WatermarkKey",
    "load_key",
    "save_key",
]

KEY_FORMAT = "pmark-key"
KEY_VERSION = 1
SECRET_BYTES = 32
#: Key files are tiny; anything larger is not a key file (guards against reading a huge file by mistake).
_MAX_KEY_FILE_BYTES = 1 << 16


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
    """

    secret: bytes
    encoder: str
    dim: int
    channels: int

    def __post_init__(self) -> None:
        if not isinstance(self.secret, bytes) or len(self.secret) != SECRET_BYTES:
            raise PMarkValueError(f"secret must be exactly {SECRET_BYTES} bytes")
        if not isinstance(self.encoder, str) or not self.encoder:
            raise PMarkValueError("encoder must be a non-empty string (the encoder's name)")
        dim = check_positive_int("dim", self.dim)
        channels = check_bits(self.channels, dim)
        object.__setattr__(self, "dim", dim)
        object.__setattr__(self, "channels", channels)

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
            f"fingerprint={self.fingerprint!r}, secret=<redacted>)"
        )

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, WatermarkKey):
            return NotImplemented
        return hmac.compare_digest(self.secret, other.secret) and (self.encoder, self.dim, self.channels) == (
            other.encoder,
            other.dim,
            other.channels,
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
        """A short public identifier of the key (16 hex digits of ``HMAC(secret, "fingerprint")``)."""
        return self.prf("fingerprint", 8).hex()

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
def _key_to_json(key: WatermarkKey) -> str:
    doc = {
        "format": KEY_FORMAT,
        "version": KEY_VERSION,
        "encoder": key.encoder,
        "dim": key.dim,
        "channels": key.channels,
        "secret": key.secret.hex(),
    }
    return json.dumps(doc, indent=2) + "\n"


def save_key(key: WatermarkKey, path: str | os.PathLike[str], *, force: bool = False) -> Path:
    """Write ``key`` as a JSON key file, atomically, readable by the owner only (mode 0600).

    The file is written to a temporary file in the same folder and moved into place, so a crash never leaves
    a half-written key. Without ``force`` an existing file is never replaced (the move is a hard link, which
    fails if the target exists).

    Args:
      key: the key.
      path: destination.
      force: replace an existing file.

    Returns:
      The path written.

    Raises:
      FileExistsError: ``path`` exists and ``force`` is false.
      OSError: the folder does not exist or is not writable.
    """
    path = Path(path)
    if path.exists() and not force:
        raise FileExistsError(f"key file {path} already exists (use force=True / --force to overwrite)")
    folder = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)  # created with mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(_key_to_json(key))
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o600)
        if force:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)  # atomic and refuses to overwrite
            except FileExistsError:
                raise FileExistsError(
                    f"key file {path} already exists (use force=True / --force to overwrite)"
                ) from None
            except OSError:  # file system without hard links: best effort
                if path.exists():
                    raise FileExistsError(f"key file {path} already exists") from None
                os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return path


def _field(doc: dict, name: str, kind: type, path: Path) -> Any:
    if name not in doc:
        raise KeyFileError(f"key file {path} is missing the field {name!r}")
    value = doc[name]
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise KeyFileError(f"key file {path}: field {name!r} must be an integer")
    if kind is str and not isinstance(value, str):
        raise KeyFileError(f"key file {path}: field {name!r} must be a string")
    return value


def load_key(path: str | os.PathLike[str], expected_dim: int | None = None) -> WatermarkKey:
    """Read a JSON key file written by :func:`save_key`.

    Args:
      path: the key file.
      expected_dim: the dimension of the encoder that will be used; a different ``dim`` in the file raises.

    Returns:
      The key.

    Raises:
      KeyFileError: the file is missing or unreadable, is not valid UTF-8 JSON, is not a ``pmark-key`` file,
        has an unsupported version, a malformed secret or fields, or its ``dim`` differs from ``expected_dim``.
        Messages never contain the secret.
    """
    path = Path(path)
    try:
        if not path.exists():
            raise KeyFileError(f"key file {path} does not exist")
        if path.is_dir():
            raise KeyFileError(f"key file {path} is a directory, not a key file")
        if path.stat().st_size > _MAX_KEY_FILE_BYTES:
            raise KeyFileError(f"key file {path} is too large to be a PMark key file")
        raw = path.read_bytes()
    except OSError as exc:
        raise KeyFileError(f"cannot read key file {path}: {exc.strerror or exc}") from None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise KeyFileError(f"key file {path} is corrupt (not UTF-8 text)") from None
    except json.JSONDecodeError as exc:
        raise KeyFileError(
            f"key file {path} is corrupt (invalid JSON at line {exc.lineno}, column {exc.colno})"
        ) from None
    if not isinstance(doc, dict) or doc.get("format") != KEY_FORMAT:
        raise KeyFileError(f'{path} is not a PMark key file (expected "format": "{KEY_FORMAT}")')
    version = doc.get("version")
    if version != KEY_VERSION or isinstance(version, bool):
        raise KeyFileError(
            f"key file {path} has unsupported version {version!r} (this pmark reads version {KEY_VERSION})"
        )
    encoder = _field(doc, "encoder", str, path)
    dim = _field(doc, "dim", int, path)
    channels = _field(doc, "channels", int, path)
    secret_hex = _field(doc, "secret", str, path)
    if len(secret_hex) != 2 * SECRET_BYTES:
        raise KeyFileError(f"key file {path}: the secret must be {2 * SECRET_BYTES} hexadecimal digits")
    try:
        secret = bytes.fromhex(secret_hex)
    except ValueError:
        raise KeyFileError(f"key file {path}: the secret is not hexadecimal") from None
    try:
        key = WatermarkKey(secret=secret, encoder=encoder, dim=dim, channels=channels)
    except PMarkValueError as exc:
        raise KeyFileError(f"key file {path} is invalid: {exc}") from None
    if expected_dim is not None and key.dim != expected_dim:
        raise KeyFileError(
            f"key file {path} was made for a {key.dim}-dimensional encoder ({key.encoder!r}), "
            f"but the encoder in use has dimension {expected_dim}"
        )
    return key
