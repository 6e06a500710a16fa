"""``pmark schemes``: the schemes this installation knows, with their settings (issue 25).

Built-ins, the entry points of the group ``pmark.schemes`` (loaded to read their settings; a plug-in that fails
to load is listed with its error), and any ``--load MODULE:ATTRIBUTE`` (a registered plug-in, imported as
``--scheme`` would import it). A plug-in is checked as it loads: one whose settings are not strict JSON (a NaN
default, an object JSON has no value for) is refused, so ``--json`` prints strict JSON (issue 36).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["add_parser", "cmd_schemes", "scheme_table"]


def add_parser(sub: Any) -> None:
    """Add the ``schemes`` subcommand to ``sub``."""
    p = sub.add_parser(
        "schemes", help="list the watermarking schemes (built-in and plug-ins) and their settings"
    )
    p.add_argument(
        "--load",
        action="append",
        default=None,
        metavar="MODULE:ATTR",
        help="also load this registered scheme plug-in (repeatable), as --scheme MODULE:ATTR would",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_schemes)


def scheme_table() -> list[dict[str, Any]]:
    """One entry per scheme: name, origin, summary, default ``N``, keyed, calibration and settings."""
    from pmark_impl.schemes import available_schemes, get_scheme
    from pmark_theory._validate import PMarkValueError

    out = []
    for name, origin, summary in available_schemes():
        entry: dict[str, Any] = {"name": name, "origin": origin, "summary": summary}
        try:
            scheme = get_scheme(name)
        except PMarkValueError:
            out.append(entry)
            continue
        cal = scheme.calibration
        entry.update(
            default_n=scheme.default_n,
            keyed=scheme.keyed,
            detector=scheme.detect is not None,
            calibration=None if cal is None else {"name": cal.name, "stored_in": cal.stored_in, "command": cal.command},
            settings=[
                {"name": o.name, "default": o.default if o.cli_default is None else o.cli_default, "detect": o.detect,
                 "generate": o.generate, "help": o.help}
                for o in scheme.options
            ],
        )  # fmt: skip
        out.append(entry)
    return out


def cmd_schemes(args: argparse.Namespace) -> int:
    """Print :func:`scheme_table` (text or ``--json``)."""
    from pmark_impl.schemes import get_scheme

    for spec in args.load or []:
        get_scheme(spec)  # refused unless registered (one line, exit 2)
    table = scheme_table()
    if args.json:
        sys.stdout.write(json.dumps(table, indent=2, allow_nan=False) + "\n")  # strict JSON (issue 36)
        return 0
    lines = [
        "Settings: --set NAME=VALUE (the built-ins' also as flags: lsh_dim is --lsh-dim); [detect]: detection "
        "needs it and reads it from the provenance record; [detect only]: a setting of the detector alone "
        "(given to pmark detect, never recorded).",
        "",
    ]
    for e in table:
        lines.append(f"{e['name']}  ({e['origin']})  {e['summary']}")
        if "settings" not in e:
            continue
        cal = e["calibration"]
        extra = f"N = {e['default_n']}" + ("" if e["keyed"] else ", keyless")
        if cal is not None:
            extra += f", calibration: {cal['name']} ({cal['stored_in']}; {cal['command']})"
        lines.append(f"    {extra}")
        for s in e["settings"]:
            tag = (" [detect]" if s.get("generate", True) else " [detect only]") if s["detect"] else ""
            lines.append(f"    {s['name']} (default {s['default']!r}){tag}: {s['help']}")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
