"""Issues 37 and 39 on the command line, as standing fuzz cases (:func:`localize_cli_cases`).

``pmark detect --localize`` and the detection-only soft-count flags: a scheme that cannot localise, a bad mode and
a PMark flag given to another scheme are refused with one line (exit 2) before any model loads; a localisation that
can run answers (exit 0) without an internal error.
"""

from __future__ import annotations

import shlex

from _fuzz_assets import TEXT, Assets
from _fuzz_harness import CliCase, FileSpec

DETECT = "detect --key k.key --no-provenance"
#: ``(what is tried, the command line, must it be refused)``.
LINES = (
    ("localisation with a scheme without per-sentence evidence", f"{DETECT} --scheme simmark --localize in.txt", True),
    ("an unknown localisation mode", f"{DETECT} --localize --localize-mode everywhere in.txt", True),
    ("PMark's soft-count margin given to SemStamp", f"{DETECT} --scheme semstamp --delta 0.5 in.txt", True),
    ("PMark's smoothing given to k-SemStamp", f"{DETECT} --scheme ksemstamp --K 20 in.txt", True),
    ("localisation of a human text", f"{DETECT} --localize in.txt", False),
    ("aligned localisation with the soft count's own settings", f"{DETECT} --localize --localize-mode aligned "
     "--delta 0.01 --K 100 in.txt", False),
    ("localisation at the decision level", f"{DETECT} --localize --decision-only in.txt", False),
)  # fmt: skip


def localize_cli_cases(assets: Assets) -> list[CliCase]:
    """The command lines of :data:`LINES`, each with a key and a human text."""
    files = (FileSpec("k.key", data=assets.keys["k"], mode=0o600), FileSpec("in.txt", data=TEXT))

    def case(tag: str, line: str, refuse: bool) -> CliCase:
        argv = tuple(shlex.split(line))
        return CliCase(argv[0], f"issue 39: {tag}", argv, files, must_refuse=refuse)

    return [case(*entry) for entry in LINES]
