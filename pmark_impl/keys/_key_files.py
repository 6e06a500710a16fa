"""Key files: JSON, written atomically with mode 0600, read with a size limit and strict checks (docs/architecture.md "The watermark key", K1).

``{"format": "pmark-key", "version": 1, "encoder", "dim", "channels", "secret": hex}``; version 2 adds the
optional ``"calibration"`` (proxy centre and per-channel null sign counts, K1, ``pmark calibrate``) and
``"seeding"`` (context-aware seeds, Z1–Z4) and ``"centroids"`` (k-SemStamp centroids fitted on a corpus, E2:
``{"k", "d", "corpus", "corpus_fingerprint", "n_sentences", "seed", "values": [k rows of d numbers]}``,
:mod:`pmark_impl.keys._centroids`) and ``"cell_calibrations"`` (a list: the cell masses of SemStamp-style cell
maps, one object per map, :mod:`pmark_impl.keys._cell_calibration`, K1). A key without any of them is written as version 1. Keys are never
pickled; a file that group or others may read is refused on load (unless ``allow_insecure=True``); the secret
never appears in errors.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from pmark_impl._user_json import parse_user_json
from pmark_impl.keys._calibration import calibration_from_json
from pmark_impl.keys._cell_calibration import cell_calibrations_from_json
from pmark_impl.keys._centroids import centroids_from_json
from pmark_impl.keys._key_fields import (
    KEY_FORMAT,
    KEY_VERSION,
    KEY_VERSIONS,
    SECRET_BYTES,
    KeyFileError,
    check_encoder_name,
    check_key_shape,
    check_seeding,
    shown,
)
from pmark_impl.keys._key_meaning import check_key_meaning
from pmark_impl.keys._keys import WatermarkKey
from pmark_impl.keys._text_nulls import text_nulls_from_json
from pmark_theory._validate import PMarkValueError, check_positive_int
from pmark_theory.infra.files import UserFileError, read_bounded, write_atomic
from pmark_theory.infra.json import JSONFormatError, loads_strict

__all__ = ["key_from_document", "load_key", "save_key"]  # the field rules: pmark_impl.keys._key_fields

#: Key files are small (a calibrated key holds a ``d``-vector and its text-level nulls, K3); anything larger than
#: 8 MiB is not a key file (guards against reading a huge file by mistake).
_MAX_KEY_FILE_BYTES = 1 << 23


def _key_to_json(key: WatermarkKey) -> str:
    # every field that differs from the default is written (a position-seeded key's window too), so the key
    # read back is equal to the key written
    default_seeding = (key.seeding, key.seed_window) == ("position", 1)
    doc: dict[str, Any] = {
        "format": KEY_FORMAT,
        "version": 1
        if key.calibration is None
        and default_seeding
        and key.fitted_centroids is None
        and not key.cell_calibrations
        and not key.text_nulls
        else KEY_VERSION,
        "encoder": key.encoder,
        "dim": key.dim,
        "channels": key.channels,
        "secret": key.secret.hex(),
    }
    if key.calibration is not None:
        doc["calibration"] = key.calibration.to_json_dict()
    if not default_seeding:
        doc["seeding"] = {"mode": key.seeding, "window": key.seed_window}
    if key.fitted_centroids is not None:
        doc["centroids"] = key.fitted_centroids.to_json_dict()
    if key.cell_calibrations:
        doc["cell_calibrations"] = [c.to_json_dict() for c in key.cell_calibrations]
    if key.text_nulls:
        doc["text_nulls"] = [n.to_json_dict() for n in key.text_nulls]
    return json.dumps(doc, indent=2) + "\n"


def _file_path(path: Any) -> Path:
    """``path`` as a :class:`Path`, refusing what cannot name a key file (bytes, ``None``, numbers, ``""``, NUL)."""
    fs = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
    if not isinstance(fs, str) or not fs or "\0" in fs:
        got = shown(fs) if isinstance(fs, str) else type(path).__name__
        raise KeyFileError(f"a key file path must be a non-empty str or os.PathLike of str, got {got}")
    if fs.endswith((os.sep, os.altsep or os.sep)):  # Path() would drop the slash and name a file
        raise KeyFileError(
            f"key file path {shown(fs)} ends with a separator: it names a directory, not a file"
        )
    return Path(fs)


def save_key(key: WatermarkKey, path: str | os.PathLike[str], *, force: bool = False) -> Path:
    """Write ``key`` as a JSON key file, atomically, readable by the owner only (mode 0600).

    The file is written to a temporary file in the same folder and moved into place, so a crash never leaves
    a half-written key. Without ``force`` an existing file is never replaced (the move is a hard link, which
    fails if the target exists); with ``force`` only a regular file is replaced — a device node, FIFO,
    directory or symbolic link never is. Before anything is written, the document is checked by
    :func:`key_from_document`, the very check :func:`load_key` applies: every key file written loads back.

    Args:
      key: the key (its shape must pass :func:`check_key_shape`).
      path: destination.
      force: replace an existing regular file.

    Returns:
      The path written.

    Raises:
      FileExistsError: ``path`` exists and ``force`` is false.
      KeyFileError: ``key`` is not a ``WatermarkKey``; ``path`` is not a text path, exists and is not a regular
        file, or its folder does not exist; the key breaks a key-file rule (shape out of bounds, too large).
      OSError: the folder is not writable.
    """

    if not isinstance(key, WatermarkKey):
        raise KeyFileError(f"key must be a WatermarkKey, got {type(key).__name__}")
    path = _file_path(path)
    try:
        text = _key_to_json(key)
        key_from_document(loads_strict(text, "the key"), path)  # the reader's own check, before any write
    except (KeyFileError, JSONFormatError) as exc:
        raise KeyFileError(f"cannot write key file {path}: {exc}") from None
    except ValueError as exc:  # an integer too long for JSON (more than 4300 digits)
        raise KeyFileError(f"cannot write key file {path}: {str(exc).split(':')[0]}") from None
    raw = text.encode("utf-8")
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
_HEX = frozenset("0123456789abcdefABCDEF")


def _field(doc: dict, name: str, kind: type, path: Path) -> Any:
    if name not in doc:
        raise KeyFileError(f"key file {path} is missing the field {name!r}")
    value = doc[name]
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise KeyFileError(f"key file {path}: field {name!r} must be an integer, got {type(value).__name__}")
    if kind is str and not isinstance(value, str):
        raise KeyFileError(f"key file {path}: field {name!r} must be a string, got {type(value).__name__}")
    return value


def _parse_key_document(raw: bytes, path: Path) -> Any:
    try:
        text = raw.decode("utf-8-sig")  # a leading UTF-8 byte-order mark is accepted
    except UnicodeDecodeError as exc:
        raise KeyFileError(
            f"key file {path} is corrupt (not UTF-8 text: invalid byte at offset {exc.start})"
        ) from None
    if not text.strip():
        raise KeyFileError(f"key file {path} is empty")
    # strict: a repeated member (two "secret"s) or NaN/Infinity is refused, never resolved silently
    return parse_user_json(text, f"key file {path}", KeyFileError)


def _seeding(doc: Any) -> tuple[str, int]:
    if not isinstance(doc, dict) or set(doc) != {"mode", "window"}:
        raise PMarkValueError("'seeding' must be an object with exactly the fields 'mode' and 'window'")
    try:
        return check_seeding(doc["mode"], doc["window"])
    except PMarkValueError as exc:
        raise PMarkValueError(f"'seeding': {exc}") from None


def key_from_document(doc: Any, path: str | os.PathLike[str] = "(document)") -> WatermarkKey:
    """The key a parsed key-file document describes: THE check of key files, applied on reading and writing.

    The document must have exactly the fields ``format`` (``"pmark-key"``), ``version`` (1 or 2), ``encoder``
    (:func:`check_encoder_name`), ``dim`` and ``channels`` (integers, not bools, within
    :func:`check_key_shape`) and ``secret`` (64 hexadecimal digits); version 2 may add ``calibration``,
    ``seeding`` (``{"mode", "window"}``, :func:`check_seeding`) and ``centroids`` (``centroids.d`` equal to
    ``dim``, ``k`` rows of ``d`` finite numbers, unit norm, distinct). The key is then built by
    :class:`~pmark_impl.keys._keys.WatermarkKey`, whose constructor applies the same field rules, and every
    calibration's values must mean what they say (:func:`pmark_impl.keys._key_meaning.check_key_meaning`: a centre
    in the unit ball, counts a corpus can give, sizes within :mod:`pmark_impl._limits`).
    :func:`save_key` runs this on the document it is about to write, :func:`load_key` on the one it read.

    Args:
      doc: the parsed JSON value.
      path: the file's name, for messages.

    Returns:
      The key.

    Raises:
      KeyFileError: a rule is broken (the message names the file and the field, never the secret).
    """
    path = Path(os.fspath(path))
    if not isinstance(doc, dict) or doc.get("format") != KEY_FORMAT:
        raise KeyFileError(f'{path} is not a PMark key file (expected "format": "{KEY_FORMAT}")')
    version = doc.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version not in KEY_VERSIONS:
        shown = repr(version) if len(repr(version)) <= 40 else f"{repr(version)[:37]}..."
        raise KeyFileError(
            f"key file {path} has unsupported version {shown} (this pmark reads versions {', '.join(map(str, KEY_VERSIONS))})"
        )
    fields = _FIELDS + (
        ("calibration", "seeding", "centroids", "cell_calibrations", "text_nulls") if version >= 2 else ()
    )
    unknown = sorted(str(k)[:40] for k in doc if k not in fields)
    if unknown:
        raise KeyFileError(f"key file {path} has unknown field(s) {', '.join(map(repr, unknown[:5]))}")
    encoder = _field(doc, "encoder", str, path)
    dim = _field(doc, "dim", int, path)
    channels = _field(doc, "channels", int, path)
    secret_hex = _field(doc, "secret", str, path)
    try:
        check_encoder_name(encoder)
        dim, channels = check_key_shape(dim, channels)
    except PMarkValueError as exc:
        raise KeyFileError(f"key file {path} is invalid: {exc}") from None
    if len(secret_hex) != 2 * SECRET_BYTES:
        raise KeyFileError(f"key file {path}: the secret must be {2 * SECRET_BYTES} hexadecimal digits")
    if not _HEX.issuperset(secret_hex):
        raise KeyFileError(f"key file {path}: the secret is not hexadecimal")

    try:
        cal = None if "calibration" not in doc else calibration_from_json(doc["calibration"], dim, channels)
        seeding, window = _seeding(doc.get("seeding", {"mode": "position", "window": 1}))
        cents = None if "centroids" not in doc else centroids_from_json(doc["centroids"], dim)
        cells = cell_calibrations_from_json(doc.get("cell_calibrations", []))
        nulls = text_nulls_from_json(doc.get("text_nulls", []))
        key = WatermarkKey(
            secret=bytes.fromhex(secret_hex),
            encoder=encoder,
            dim=dim,
            channels=channels,
            calibration=cal,
            seeding=seeding,
            seed_window=window,
            fitted_centroids=cents,
            cell_calibrations=cells,
            text_nulls=nulls,
        )
        check_key_meaning(key)  # what each calibration's values mean (issue 36)
        return key
    except (PMarkValueError, ValueError) as exc:
        raise KeyFileError(f"key file {path} is invalid: {exc}") from None


def load_key(
    path: str | os.PathLike[str], expected_dim: int | None = None, *, allow_insecure: bool = False
) -> WatermarkKey:
    """Read a JSON key file written by :func:`save_key`.

    At most 8 MiB are read, only from a regular file (symbolic links resolved). The document is strict JSON
    (a repeated member name, ``NaN`` or ``Infinity`` is refused: :func:`pmark_theory.infra.json.loads_strict`)
    checked by :func:`key_from_document`, the same check :func:`save_key` applies before it writes. A leading
    UTF-8 byte-order mark is accepted.

    Args:
      path: the key file (a ``str`` or ``os.PathLike``; bytes are refused).
      expected_dim: the dimension of the encoder that will be used; a different ``dim`` in the file raises.
      allow_insecure: accept a key file that group or others may access (mode ``& 0o077 != 0``). By default
        such a file is refused: the secret may already be known to other users (fix: ``chmod 600 KEY``).

    Returns:
      The key.

    Raises:
      KeyFileError: ``path`` is not a text path; the file is missing or unreadable, not a regular file, too
        large, not valid UTF-8 JSON (a repeated member included), not a ``pmark-key`` file, of an unsupported
        version, has a malformed secret or fields (stored centroids of the wrong dimension, non-finite, not
        unit or corrupt included) or values no calibration can have (a centre outside the unit ball, counts no
        corpus gives: :mod:`pmark_impl.keys._key_meaning`), its ``dim`` differs from ``expected_dim``, or it is
        accessible by group/others without ``allow_insecure``. Messages never contain the secret.
      PMarkValueError: ``expected_dim`` is not a positive integer, or ``allow_insecure`` not a bool.
    """
    path = _file_path(path)
    if expected_dim is not None:
        expected_dim = check_positive_int("expected_dim", expected_dim)
    if not isinstance(allow_insecure, bool):
        raise PMarkValueError(f"allow_insecure must be True or False, got {type(allow_insecure).__name__}")
    raw, st = read_bounded(path, limit=_MAX_KEY_FILE_BYTES, what="key file", error=KeyFileError)
    key = key_from_document(_parse_key_document(raw, path), path)
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
