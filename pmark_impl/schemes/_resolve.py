"""What a generation or a detection runs: the scheme named by ``scheme`` or ``mode``, and the channels ``b``.

:func:`resolve_scheme` and :func:`resolve_channels` are shared by :mod:`pmark_impl.generation`,
:mod:`pmark_impl.detection` and the command line, so that the two halves of the API read their arguments the
same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pmark_impl.schemes._base import Scheme
from pmark_impl.schemes._registry import DEFAULT_SCHEME, get_scheme
from pmark_theory._validate import PMarkValueError, check_positive_int

if TYPE_CHECKING:  # pragma: no cover
    from pmark_impl.keys import WatermarkKey

__all__ = ["resolve_channels", "resolve_scheme"]


def resolve_channels(key: WatermarkKey, channels: int | None) -> int:
    """``channels`` (default: all the key's channels), checked ``1 <= b <= key.channels``."""
    if channels is None:
        return key.channels
    b = check_positive_int("channels", channels)
    if b > key.channels:
        raise PMarkValueError(f"channels must be <= the key's {key.channels} channels, got {b}")
    return b


def resolve_scheme(scheme: Any = None, mode: Any = None, default: str = DEFAULT_SCHEME) -> Scheme:
    """The :class:`~pmark_impl.schemes.Scheme` named by ``scheme`` or its alias ``mode`` (default ``default``).

    Raises:
      PMarkValueError: both given and naming different schemes, or an unknown / unregistered scheme.
    """
    if scheme is not None and mode is not None:
        a, b = get_scheme(scheme), get_scheme(mode)
        if a is not b:
            raise PMarkValueError(
                f"scheme {a.name!r} and mode {b.name!r} disagree: give one (mode is its alias)"
            )
        return a
    if scheme is not None:
        return get_scheme(scheme)
    if mode is None:
        return get_scheme(default)
    try:
        return get_scheme(mode)
    except PMarkValueError as exc:
        msg = str(exc)
        raise PMarkValueError(
            "mode" + msg[len("scheme") :] if msg.startswith("scheme must") else msg
        ) from None
