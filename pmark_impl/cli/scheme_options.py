"""The command line's side of the Scheme interface: ``--scheme`` (alias ``--mode``), the scheme's flags, ``--set``.

Every command that takes a scheme (``generate``, ``detect``, ``evaluate``) resolves it here, before any model
loads: ``--scheme NAME|MODULE:ATTRIBUTE`` (``--mode`` is its alias; both naming different schemes is an error), then
the scheme's settings from the flags named after its options (``--lsh-dim`` for ``lsh_dim``, ...) and from
``--set NAME=VALUE`` (any option, a plug-in's included). A flag of another scheme is refused unless it repeats
that scheme's default. Nothing here names a scheme.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from pmark_impl.schemes import DEFAULT_SCHEME, Scheme, get_scheme, is_default, known_options, scheme_options
from pmark_theory._validate import PMarkValueError

__all__ = ["add_scheme_arguments", "cli_scheme", "cli_settings", "flag_of", "parse_set"]


def flag_of(name: str) -> str:
    """The flag of an option: ``lsh_dim`` -> ``--lsh-dim``."""
    return "--" + name.replace("_", "-")


def add_scheme_arguments(p: argparse.ArgumentParser, default: str | None, what: str) -> None:
    """``--scheme``, its alias ``--mode``, and ``--set NAME=VALUE`` on ``p``."""
    shown = f"default {default}" if default else f"default: the record's, else {DEFAULT_SCHEME}"
    p.add_argument(
        "--scheme",
        default=None,
        metavar="NAME|MODULE:ATTR",
        help=f"the scheme {what} (pmark schemes lists them): online, offline, semstamp, ksemstamp, simmark, an "
        f"installed plug-in's name or a registered MODULE:ATTRIBUTE ({shown})",
    )
    p.add_argument("--mode", default=None, metavar="NAME", help="alias of --scheme")
    p.add_argument(
        "--set",
        dest="scheme_set",
        action="append",
        default=None,
        metavar="NAME=VALUE",
        help="a setting of the scheme (repeatable; VALUE is JSON or a plain string): e.g. --set threshold=0.1",
    )


def cli_scheme(args: argparse.Namespace, default: str | None) -> Scheme | None:
    """The scheme of ``--scheme`` / ``--mode`` (``default`` when neither; ``None`` when that is ``None``).

    Also sets ``args.mode`` to the scheme's name, so that later code reads one attribute.

    Raises:
      PMarkValueError: an unknown or unregistered scheme, or ``--scheme`` and ``--mode`` naming different ones.
    """
    given = [
        (flag, v)
        for flag, v in (("--scheme", getattr(args, "scheme", None)), ("--mode", args.mode))
        if v is not None
    ]
    if not given:
        if default is None:
            return None
        scheme = get_scheme(default)
    else:
        schemes = [get_scheme(v) for _, v in given]
        if len(schemes) == 2 and schemes[0] is not schemes[1]:
            raise PMarkValueError(
                f"--scheme {schemes[0].name} and --mode {schemes[1].name} disagree: give one (--mode is an alias)"
            )
        scheme = schemes[0]
    args.mode = scheme.name
    return scheme


def parse_set(items: list[str] | None) -> dict[str, Any]:
    """``--set NAME=VALUE`` items as ``{name: value}`` (VALUE parsed as strict JSON, else kept as a string:
    ``NaN`` and ``Infinity``, which are not JSON, stay the strings ``"NaN"`` and ``"Infinity"``).

    Raises:
      PMarkValueError: an item without ``=``, a name that is not an identifier, or a name given twice.
    """
    out: dict[str, Any] = {}
    for item in items or []:
        name, sep, raw = item.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or not name.isidentifier():
            raise PMarkValueError(f"--set needs NAME=VALUE, got {item[:60]!r}")
        if name in out:
            raise PMarkValueError(f"--set gives {name} twice")
        try:
            value = json.loads(raw, parse_constant=_not_json)  # NaN / Infinity are not JSON: kept as text
        except ValueError:
            value = raw
        if isinstance(value, (dict, list)) or value is None:
            value = raw
        out[name] = value
    return out


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def cli_settings(
    args: argparse.Namespace, scheme: Scheme, side: str = "generate", defaults: bool = True
) -> dict[str, Any]:
    """The scheme's settings given on the command line (module docstring); ``None`` values: not given.

    Args:
      args: the parsed arguments.
      scheme: the resolved scheme.
      side: ``"generate"`` or ``"detect"`` (the options detection takes).
      defaults: fill each option's ``cli_default`` when its flag is not given.

    Raises:
      PMarkValueError: a flag of another scheme away from that scheme's default, a ``--set`` name the scheme does
        not have, a value given both as a flag and with ``--set``.
    """
    extra = parse_set(getattr(args, "scheme_set", None))
    mine = {o.name: o for o in scheme_options(scheme, side)}
    out: dict[str, Any] = {}
    for name, entries in known_options().items():
        value = getattr(args, name, None)
        if value is None:
            continue
        if name in mine:
            out[name] = value
            continue
        if any(o.name == name for o in scheme.options):  # a generation-only flag does not exist at detection
            continue
        if all(is_default(value, opt) for _, opt in entries):
            continue
        names = " and ".join(s for s, _ in entries)
        raise PMarkValueError(f"{flag_of(name)} applies to --scheme {names} only, not to {scheme.name!r}")
    for name, value in extra.items():
        if name not in mine:
            own = ", ".join(mine) or "none"
            raise PMarkValueError(
                f"--set {name}: scheme {scheme.name!r} has no such setting (its settings: {own})"
            )
        if name in out:
            raise PMarkValueError(f"{name} is given both as {flag_of(name)} and with --set")
        out[name] = value
    if defaults:
        for name, opt in mine.items():
            if name not in out and opt.cli_default is not None:
                out[name] = opt.cli_default
    return out
