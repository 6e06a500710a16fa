"""Key files: JSON, written atomically with mode 0600, read with a size limit and strict checks (DESIGN.md, K1).

``{"format": "pmark-key", "version": 1, "encoder", "dim", "channels", "secret": hex}``; version 2 adds the
optional ``"calibration"`` (proxy centre and per-channel null sign counts, K1, ``pmark calibrate``) and
``"seeding"`` (context-aware seeds, Z1–Z4) and ``"centroids"`` (k-SemStamp centroids fitted on a corpus, E2:
``{"k", "d", "corpus", "corpus_fingerprint", "n_sentences", "seed", "values": [k rows of d numbers]}``,
:mod:`pmark_impl._centroids`). A key without any of them is written as version 1. Keys are never
pickled; a file that group or others may read is refused on load (unless ``allow_insecure=True``); the secret
never appears in errors.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pmark_impl._calibration import calibration_from_json
from pmark_impl._centroids import centroids_from_json
from pmark_theory._files import UserFileError, read_bounded, write_atomic
from pmark_theory._validate import PMarkValueError, check_bits, check_positive_int

if TYPE_CHECKING:
    from pmark_impl._keys import WatermarkKey

__all__ = [
    "KEY_FORMAT",
    "KEY_VERSION",
    "KEY_VERSIONS",
    "MAX_KEY_CHANNELS",
    "MAX_KEY_DIM",
    "SECRET_BYTES",
    "KeyFileError",
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
        "version": 1
        if key.calibration is None and key.seeding == "position" and key.fitted_centroids is None
        else KEY_VERSION,
        "encoder": key.encoder,
        "dim": key.dim,
        "channels": key.channels,
        "secret": key.secret.hex(),
    }
    if key.calibration is not None:
        doc["calibration"] = key.calibration.to_json_dict()
    if key.seeding != "position":
        doc["seeding"] = {"mode": key.seeding, "window": key.seed_window}
    if key.fitted_centroids is not None:
        doc["centroids"] = key.fitted_centroids.to_json_dict()
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
    raw = _key_to_json(key).encode("utf-8")
    if len(raw) > _MAX_KEY_FILE_BYTES:
        raise KeyFileError(
            f"cannot write key file {path}: {len(raw)} bytes exceed the key file limit of {_MAX_KEY_FILE_BYTES} "
            "bytes (store fewer centroids)"
        )
    try:
        return write_atomic(path, raw, force=force, mode=0o600, what="key file")
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
    fields = _FIELDS + (("calibration", "seeding", "centroids") if version >= 2 else ())
    unknown = sorted(str(k)[:40] for k in doc if k not in fields)
    if unknown:
        raise KeyFileError(f"key file {path} has unknown field(s) {', '.join(map(repr, unknown[:5]))}")
    return doc


def _seeding(doc: Any) -> tuple[str, int]:
    if not isinstance(doc, dict) or set(doc) != {"mode", "window"}:
        raise PMarkValueError("'seeding' must be an object with exactly the fields 'mode' and 'window'")
    if doc["mode"] not in ("position", "context"):
        raise PMarkValueError("'seeding.mode' must be 'position' or 'context'")
    w = doc["window"]
    if isinstance(w, bool) or not isinstance(w, int) or not 1 <= w <= 64:
        raise PMarkValueError("'seeding.window' must be an integer in 1..64")
    return doc["mode"], w


def load_key(
    path: str | os.PathLike[str], expected_dim: int | None = None, *, allow_insecure: bool = False
) -> WatermarkKey:
    """Read a JSON key file written by :func:`save_key`.

    At most 2 MiB are read, only from a regular file (symbolic links resolved); the document must have
    exactly the fields ``format`` (``"pmark-key"``), ``version`` (1), ``encoder`` (a printable string),
    ``dim`` and ``channels`` (integers, not bools, within :func:`check_key_shape`) and ``secret``
    (64 hexadecimal digits); version 2 may add ``calibration``, ``seeding`` and ``centroids`` (checked:
    ``centroids.d`` equal to ``dim``, ``k`` rows of ``d`` finite numbers, unit norm, distinct). A leading UTF-8
    byte-order mark is accepted; ``NaN``/``Infinity`` are not.

    Args:
      path: the key file.
      expected_dim: the dimension of the encoder that will be used; a different ``dim`` in the file raises.
      allow_insecure: accept a key file that group or others may access (mode ``& 0o077 != 0``). By default
        such a file is refused: the secret may already be known to other users (fix: ``chmod 600 KEY``).

    Returns:
      The key.

    Raises:
      KeyFileError: the file is missing or unreadable, not a regular file, too large, not valid UTF-8 JSON,
        not a ``pmark-key`` file, of an unsupported version, has a malformed secret or fields (stored
        centroids of the wrong dimension, non-finite, not unit or corrupt included), its ``dim``
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
    from pmark_impl._keys import WatermarkKey  # here, not at the top: _keys imports this module

    try:
        cal = None if "calibration" not in doc else calibration_from_json(doc["calibration"], dim, channels)
        seeding, window = _seeding(doc.get("seeding", {"mode": "position", "window": 1}))
        cents = None if "centroids" not in doc else centroids_from_json(doc["centroids"], dim)
        key = WatermarkKey(
            secret=bytes.fromhex(secret_hex),
            encoder=encoder,
            dim=dim,
            channels=channels,
            calibration=cal,
            seeding=seeding,
            seed_window=window,
            fitted_centroids=cents,
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
