"""Issue 36's scheme plug-ins that misbehave, as standing fuzz cases (:func:`plugin_cli_cases`).

Each command line names one plug-in of :mod:`_plugins36` (``--scheme _plugins36:FACTORY`` or ``pmark schemes
--load``) and must be refused: exit 2 with one ``pmark…: error: …`` line that is not an internal error, and the
case folder untouched (no text without its record). On the code the issue was filed against (commit e03a448)
each one broke a rule: an internal error (exit 1) for an option check, ``step``, ``init`` or ``detect`` that
raises or returns the wrong type and for a default JSON has no value for; a text written before its record failed
(NaN settings); exit 0 for ``pmark schemes --json`` printing ``NaN`` and for a ``step`` calling ``sys.exit(0)``.
"""

from __future__ import annotations

import shlex
from typing import Any

from _fuzz_assets import TEXT, Assets
from _fuzz_harness import CliCase, FileSpec

GENERATE = "generate --key k.key --max-sentences 2 --n 4 --out o.txt --scheme _plugins36:"
DETECT = "detect --key k.key --no-provenance --scheme _plugins36:"
#: ``(what the plug-in does and what the old code did, the command line)``.
LINES = (
    ("an option default NaN: the text written, then its record failed", f"{GENERATE}nan_default P."),
    ("an option default object(): TypeError, an internal error", f"{GENERATE}object_default P."),
    ("an infinite cli_default: the text written, then its record failed", f"{GENERATE}inf_cli_default P."),
    ("an option check raising on its default: an internal error", f"{GENERATE}check_fails_on_default P."),
    ("an option check raising on the user's value", f"{GENERATE}check_fails_on_string --set p36_step=abc P."),
    (
        "an option check keeping NaN: the text written, then no record",
        f"{GENERATE}check_keeps_nan --set p36_rate=NaN P.",
    ),
    ("a scheme check resolving NaN: the text written, then no record", f"{GENERATE}scheme_check_nan P."),
    ("a step raising RuntimeError: an internal error", f"{GENERATE}step_raises P."),
    ("a step returning integers as candidates: AttributeError", f"{GENERATE}step_garbage P."),
    ("a step calling sys.exit(0): exit 0 and no text", f"{GENERATE}step_exits P."),
    ("an init raising KeyError: an internal error", f"{GENERATE}init_raises P."),
    ("a detect returning floats: AttributeError 'to_dict'", f"{DETECT}detect_floats in.txt"),
    ("a detect dividing by zero: an internal error", f"{DETECT}detect_raises in.txt"),
    ("pmark schemes --json printed NaN (invalid JSON)", "schemes --load _plugins36:nan_default --json"),
    ("pmark schemes --json with a help JSON cannot print", "schemes --load _plugins36:object_help --json"),
)


def plugin_cli_cases(assets: Assets) -> list[CliCase]:
    """The command lines of :data:`LINES`, each with a key and a text, each to be refused with the folder untouched."""
    files = (FileSpec("k.key", data=assets.keys["k"], mode=0o600), FileSpec("in.txt", data=TEXT))

    def case(tag: str, line: str) -> CliCase:
        argv = tuple(shlex.split(line))
        return CliCase(argv[0], f"issue 36: {tag}", argv, files, outputs=("o.txt", "o.txt.pmark.json"),
                       must_refuse=True)  # fmt: skip

    return [case(tag, line) for tag, line in LINES]


def by_group(assets: Any) -> dict[str, list[CliCase]]:
    """:func:`plugin_cli_cases` by subcommand (the shape of ``_fuzz_issue_cases.issue_cli_cases``)."""
    out: dict[str, list[CliCase]] = {}
    for c in plugin_cli_cases(assets):
        out.setdefault(c.group, []).append(c)
    return out
