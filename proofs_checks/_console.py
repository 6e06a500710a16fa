"""What ``pmark check`` prints: one line per check that fits a terminal, then a one-line tally.

Each check's line reads ``PASS  C4  corrected  control caught  <measured, shortened>``: its status, claim ID,
verdict (with the expected one when it differs), whether its negative control was caught (the deliberately wrong
variant of the code made the check fail, as it must) and the start of what it measured, cut to the terminal's
width (80 to 100 columns); the full figures are in the report. The run ends with a tally of the verdicts and
controls, derived from the results, that names the checks that missed their expected verdict or whose control
was not caught.
"""

from __future__ import annotations

import shutil
import unicodedata
from collections import Counter
from collections.abc import Sequence
from typing import Any

__all__ = [
    "MAX_COLUMNS",
    "MIN_COLUMNS",
    "check_lines",
    "console_columns",
    "control_outcome",
    "display_width",
    "tally",
]

#: The narrowest and widest line the per-check lines are fitted to.
MIN_COLUMNS, MAX_COLUMNS = 80, 100
#: The verdicts, in the order the tally lists them (others, e.g. ``error``, follow).
VERDICTS = ("confirmed", "corrected", "refuted")
#: At most this many IDs are named in the tally per list; the rest are counted.
MAX_NAMED = 8
_ELLIPSIS = "…"


def display_width(text: str) -> int:
    """Terminal columns of ``text``: wide (East Asian) characters count two, combining marks none."""
    return sum(
        0 if unicodedata.combining(ch) else 2 if unicodedata.east_asian_width(ch) in "WF" else 1
        for ch in text
    )


def _fit(text: str, columns: int) -> str:
    """``text`` cut at a word boundary (or mid-word when it must) so that it fits ``columns``, with ``…``."""
    if display_width(text) <= columns:
        return text
    if columns <= 0:
        return ""
    out, used = [], display_width(_ELLIPSIS)
    for ch in text:
        w = display_width(ch)
        if used + w > columns:
            break
        out.append(ch)
        used += w
    cut = "".join(out)
    space = cut.rfind(" ")
    if space >= len(cut) // 2:  # a word boundary not too far back
        cut = cut[:space]
    return cut.rstrip(" ,;:(") + _ELLIPSIS


def console_columns() -> int:
    """The terminal's width, clamped to [80, 100] (80 when the output is not a terminal and COLUMNS is unset)."""
    cols = shutil.get_terminal_size((MIN_COLUMNS, 24)).columns
    return max(MIN_COLUMNS, min(MAX_COLUMNS, cols))


def _control_caught(rec: dict[str, Any]) -> bool:
    return bool((rec.get("negative_control") or {}).get("failed"))


def _control_run(rec: dict[str, Any]) -> bool:
    return rec.get("verdict") != "error"


def control_outcome(rec: dict[str, Any]) -> str:
    """``control caught`` (the wrong variant made the check fail, as it must), ``control NOT caught`` or
    ``control not run`` (the check raised an error before its control)."""
    if not _control_run(rec):
        return "control not run"
    return "control caught" if _control_caught(rec) else "control NOT caught"


def _verdict_text(rec: dict[str, Any]) -> str:
    verdict, expected = str(rec.get("verdict")), str(rec.get("expected_verdict"))
    return verdict if verdict == expected else f"{verdict} (expected {expected})"


def _measured(rec: dict[str, Any]) -> str:
    return " ".join(str(rec.get("measured", "")).split())


def check_lines(results: Sequence[dict[str, Any]], columns: int | None = None) -> list[str]:
    """One line per result, each at most ``columns`` wide (default :func:`console_columns`)."""
    columns = console_columns() if columns is None else columns
    if not results:
        return []
    id_w = max(display_width(str(r["id"])) for r in results)
    verdict_w = max(display_width(str(r.get("verdict"))) for r in results)  # a missed one sticks out
    ctrl_w = max(display_width(control_outcome(r)) for r in results)
    lines = []
    for r in results:
        cid, verdict, ctrl = str(r["id"]), _verdict_text(r), control_outcome(r)
        head = (
            f"{'PASS' if r.get('passed') else 'FAIL'}  {cid}{' ' * (id_w - display_width(cid))}  "
            f"{verdict}{' ' * (verdict_w - display_width(verdict))}  "
            f"{ctrl}{' ' * (ctrl_w - display_width(ctrl))}  "
        )
        head = _fit(head, columns)
        lines.append((head + _fit(_measured(r), columns - display_width(head))).rstrip())
    return lines


def _named(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:MAX_NAMED])
    return shown if len(ids) <= MAX_NAMED else f"{shown} and {len(ids) - MAX_NAMED} more"


def tally(results: Sequence[dict[str, Any]]) -> str:
    """The run in one line: verdict counts, how many matched their expectation, how many controls were caught.

    For example ``40 checks: 16 confirmed, 22 corrected, 2 refuted — all as expected; 40 of 40 controls
    caught`` (the negative controls). The checks that missed their expected verdict and those whose control was
    not caught (or not run) are named, at most :data:`MAX_NAMED` per list.
    """
    n = len(results)
    counts = Counter(str(r.get("verdict")) for r in results)
    order = [v for v in VERDICTS if counts[v]] + sorted(v for v in counts if v not in VERDICTS)
    verdicts = ", ".join(f"{counts[v]} {v}" for v in order) or "none run"
    missed = [str(r["id"]) for r in results if r.get("verdict") != r.get("expected_verdict")]
    if not missed:
        expected = "all as expected" if n else "nothing to compare"
    else:
        expected = f"{len(missed)} not as expected ({_named(missed)})"
    caught = sum(_control_run(r) and _control_caught(r) for r in results)
    controls = f"{caught} of {n} controls caught"
    not_caught = [str(r["id"]) for r in results if _control_run(r) and not _control_caught(r)]
    not_run = [str(r["id"]) for r in results if not _control_run(r)]
    gaps = []
    if not_caught:
        gaps.append(f"not caught: {_named(not_caught)}")
    if not_run:
        gaps.append(f"not run: {_named(not_run)}")
    if gaps:
        controls += f" ({'; '.join(gaps)})"
    return f"{n} check{'s' if n != 1 else ''}: {verdicts} — {expected}; {controls}"
