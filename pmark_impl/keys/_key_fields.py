"""The fields of a key: format constants and ONE check per field (shared by the key, its file and the CLI).

Kept apart from :mod:`pmark_impl.keys._keys` (the key) and :mod:`pmark_impl.keys._key_files` (its file), which both use these
rules, so that neither imports the other's module for them (no import cycle).
"""

from __future__ import annotations

from typing import Any

from pmark_theory._validate import PMarkValueError, check_bits, check_positive_int

__all__ = [
    "KEY_FORMAT",
    "KEY_VERSION",
    "KEY_VERSIONS",
    "MAX_ENCODER_NAME",
    "MAX_KEY_CHANNELS",
    "MAX_KEY_DIM",
    "MAX_SEED_WINDOW",
    "SECRET_BYTES",
    "SEEDINGS",
    "KeyFileError",
    "check_encoder_name",
    "check_key_shape",
    "check_seeding",
    "shown",
]

KEY_FORMAT = "pmark-key"
KEY_VERSION = 2
#: Versions this pmark reads (1: no calibration).
KEY_VERSIONS = (1, 2)
SECRET_BYTES = 32
#: Bounds of a key *file* (:func:`check_key_shape`): encoder dimension ``d`` and channels ``b``.
MAX_KEY_DIM = 1 << 16
MAX_KEY_CHANNELS = 64
#: The longest encoder name a key records (:func:`check_encoder_name`).
MAX_ENCODER_NAME = 1024
#: Where a key's bits come from (:func:`check_seeding`), and the longest context-seeding window.
SEEDINGS = ("position", "context")
MAX_SEED_WINDOW = 64


class KeyFileError(PMarkValueError):
    """A key file is missing, unreadable, corrupt, of another format/version, or does not fit the encoder."""


# --------------------------------------------------------------------------------------------------------------
# The rules of a key's fields: ONE function per field, applied by the constructor (``WatermarkKey``), by
# ``save_key`` and by ``load_key`` alike, so that what is written is what is read back.
# --------------------------------------------------------------------------------------------------------------
def shown(value: Any) -> str:
    """``repr(value)`` cut to about 60 characters (a user's value in a one-line error)."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"


def check_encoder_name(name: Any) -> str:
    """The encoder name a key records: a non-empty printable string of at most 1024 characters.

    Printable as ``str.isprintable``: no newline, tab, control or format character, no lone surrogate and no
    separator but the ASCII space. One rule for keys made in memory, written and read.

    Raises:
      PMarkValueError: anything else (the message shows the start of the name).
    """
    if not isinstance(name, str) or not name or len(name) > MAX_ENCODER_NAME or not name.isprintable():
        got = shown(name) if isinstance(name, str) else type(name).__name__
        raise PMarkValueError(
            f"encoder must be a non-empty printable string of at most {MAX_ENCODER_NAME} characters (the "
            f"encoder's name: no newline, tab or other control character), got {got}"
        )
    return name


def check_seeding(mode: Any, window: Any) -> tuple[str, int]:
    """A key's seeding mode (``"position"`` or ``"context"``) and context window ``w`` in ``1..64``.

    Raises:
      PMarkValueError: another mode, or a window that is not an integer in ``1..64`` (bools refused).
    """
    if not isinstance(mode, str) or mode not in SEEDINGS:
        raise PMarkValueError(f"seeding must be 'position' or 'context', got {shown(mode)}")
    if isinstance(window, bool) or not isinstance(window, int) or not 1 <= window <= MAX_SEED_WINDOW:
        raise PMarkValueError(f"seed_window must be an integer in 1..{MAX_SEED_WINDOW}, got {shown(window)}")
    return mode, window


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
