"""``pmark calibrate``'s text-level nulls: fit them for the scheme's per-key tests, measure them, report (K3).

After the scheme's own calibration, each test the scheme declares in ``SchemeCalibration.null_tests`` gets a
text-level null in the key (:func:`pmark_impl.detection._text_null_fit.fit_text_null`): the detector's raw
p-values of this key on whole human texts of every length in ``--null-lengths``. The report then gives, for
each such test, the held-out false-positive rate of the test's own p-value (which assumes independent sentences)
and of the text-level one, and the same on a second kind of prose (``--shift-corpus``; default the 32 built-in
encyclopedic documents of ``pmark evaluate``), and warns where the key's rate moves there.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pmark_impl.cli.files import CLIError
from pmark_theory._validate import PMarkValueError

__all__ = [
    "add_null_options",
    "caching_embed",
    "check_shift_corpus",
    "fit_nulls",
    "null_only_summary",
    "null_report_lines",
    "parse_lengths",
]

_PROMPTS = Path(__file__).resolve().parents[1] / "evaluate" / "data" / "prompts.jsonl"


def parse_lengths(text: str) -> tuple[int, ...]:
    """``"2-16"`` or ``"4,8,12"`` as text lengths (argparse type)."""
    from pmark_impl.keys import MAX_NULL_LENGTH

    try:
        if "-" in text:
            lo, hi = (int(x) for x in text.split("-", 1))
            out = tuple(range(lo, hi + 1))
        else:
            out = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected MIN-MAX or a comma list of lengths, got {text!r}"
        ) from None
    if not out or any(not 1 <= t <= MAX_NULL_LENGTH for t in out):
        raise argparse.ArgumentTypeError(f"lengths must lie in 1..{MAX_NULL_LENGTH}, got {text!r}")
    return out


def add_null_options(p: argparse.ArgumentParser) -> None:
    """The text-level null's options of ``pmark calibrate``."""
    p.add_argument(
        "--null-lengths",
        type=parse_lengths,
        default=tuple(range(2, 17)),
        metavar="MIN-MAX",
        help="text lengths of the key's text-level null (K3; default 2-16; longer texts are tested on their "
        "first sentences)",
    )
    p.add_argument(
        "--no-text-null",
        action="store_true",
        help="store no text-level null (per-key p-values then assume independent sentences)",
    )
    p.add_argument(
        "--shift-corpus",
        default="prompts",
        metavar="FILE|prompts|none",
        help="a second kind of prose on which the key's false-positive rate is measured (default: the built-in "
        "encyclopedic prompts of pmark evaluate; 'none' skips it)",
    )


def check_shift_corpus(args: argparse.Namespace) -> str | None:
    """The ``--shift-corpus`` path to read (``None``: none), checked before any model loads."""
    value = args.shift_corpus
    if value == "none" or args.no_text_null:
        return None
    path = _PROMPTS if value == "prompts" else Path(value)
    if not path.is_file():
        raise CLIError(f"--shift-corpus {value}: not a readable file")
    return str(path)


def caching_embed(embed_fn: Callable[[list[str]], np.ndarray], dim: int) -> Callable[[list[str]], np.ndarray]:
    """``embed_fn`` that embeds each distinct sentence once over all its calls."""
    cache: dict[str, np.ndarray] = {}

    def cached(sentences: list[str]) -> np.ndarray:
        missing = list(dict.fromkeys(s for s in sentences if s not in cache))
        if missing:
            for s, row in zip(missing, np.asarray(embed_fn(missing), dtype=np.float64), strict=True):
                cache[s] = row
        return np.stack([cache[s] for s in sentences]) if sentences else np.zeros((0, dim))

    return cached


def fit_nulls(
    scheme: Any,
    settings: dict[str, Any],
    key: Any,
    encoder: Any,
    documents: Sequence[Any],
    *,
    corpus: str,
    lengths: Sequence[int],
    held_out_fraction: float,
    text_sentences: int,
    embed_fn: Callable[[list[str]], np.ndarray],
    shift: Sequence[Any] | None,
    shift_name: str | None,
    alphas: Sequence[float] = (0.05, 0.01, 0.001),
) -> tuple[Any, dict[str, Any], list[str]]:
    """The key with a text-level null per test of ``scheme.calibration.null_tests``, the report and warnings."""
    from pmark_impl.cli import progress
    from pmark_impl.detection import fit_text_null, measure_text_null

    report: dict[str, Any] = {}
    warnings: list[str] = []
    # this scheme's earlier nulls were fitted with the key's earlier calibration: recalibrating replaces them
    key = dataclasses.replace(key, text_nulls=tuple(n for n in key.text_nulls if n.scheme != scheme.name))
    tests = (None,) if scheme.calibration is None else scheme.calibration.null_tests
    for test in tests:
        options = {"scheme": scheme, "test": test, **settings}
        name = test or "default"
        with progress.phase(f"fitting the text-level null of {scheme.name}'s {name} test") as fitting:
            bar = progress.bar(None, f"pmark calibrate: text-level null of {name}", "text")
            try:
                key, null = fit_text_null(
                    key,
                    encoder,
                    documents,
                    options=options,
                    lengths=lengths,
                    held_out_fraction=held_out_fraction,
                    corpus=corpus,
                    embed_fn=embed_fn,
                    progress=bar.update,
                )
            except PMarkValueError as exc:
                report[name] = {"fitted": False, "reason": str(exc)}
                fitting.outcome = "not fitted"
                continue
            finally:
                bar.close()
        entry: dict[str, Any] = {
            "fitted": True,
            "test": null.test,
            "signature": null.signature,
            "confidence": null.confidence,
            "n_texts": {str(t): len(p) for t, p in zip(null.null.lengths, null.null.null_p, strict=True)},
        }
        length = text_sentences if text_sentences in null.null.lengths else max(null.null.lengths)
        common = {"options": options, "length": length, "alphas": alphas, "embed_fn": embed_fn}
        entry["held_out"] = measure_text_null(
            key, encoder, documents, held_out_fraction=held_out_fraction, **common
        )
        if shift is not None:
            try:
                m = measure_text_null(key, encoder, shift, held_out_fraction=None, **common)
                entry["other_corpus"] = {"corpus": shift_name, **m}
            except PMarkValueError as exc:
                entry["other_corpus"] = {"corpus": shift_name, "error": str(exc)}
        for where in ("held_out", "other_corpus"):
            m = entry.get(where)
            if not m or "text_null" not in m:
                continue
            for a, r in m["text_null"].items():
                if a in m["unsupported"] or r["rate"] <= float(a):
                    continue
                strong = "significantly " if r["interval"][0] > float(a) else ""
                label = "held-out text" if where == "held_out" else f"other prose ({shift_name})"
                warnings.append(
                    f"{null.test}: the text-level false-positive rate on {label} {strong}exceeds alpha {a}: "
                    f"{r['rate']:.3f} [{r['interval'][0]:.3f}, {r['interval'][1]:.3f}] on {r['n_texts']} texts"
                    + (
                        " (the key's guarantee is for text like its calibration corpus)"
                        if where != "held_out"
                        else ""
                    )
                )
        report[null.test] = entry
    return key, report, warnings


def null_only_summary(section: dict[str, Any], key: Any, new_key: Any) -> dict[str, Any]:
    """The report fields of a scheme calibrated by its text-level null alone: the held-out FPR of the test's own
    p-value (``before``) and of the text-level one (``after``) in ``held_out_fpr``, as ``fpr_verdict`` reads them.

    Raises:
      CLIError: the null could not be fitted (its reason).
    """
    entry = next(iter(section.values()))
    if not entry.get("fitted"):
        raise CLIError(f"no text-level null could be fitted: {entry.get('reason')}")
    held = entry["held_out"]
    return {
        "key_fingerprint": {"before": key.fingerprint, "after": new_key.fingerprint},
        "n_held_out_texts": held["n_texts"],
        "held_out_fpr": {"test": entry["test"], "before": held["independent"], "after": held["text_null"]},
    }


def null_report_lines(section: dict[str, Any]) -> list[str]:
    """``report.md``'s section on the text-level nulls."""
    if not section:
        return []
    lines = [
        "",
        "## Text-level nulls (K3)",
        "",
        "Each per-key test below ranks a text's p-value among this key's p-values on whole human texts of the "
        "same length (calibration-conditional conformal p-value): valid whatever the dependence between a "
        "text's sentences, for text like the calibration corpus. `independent` is the test's own p-value "
        "(independent sentences assumed).",
        "",
        "| test | texts | length | alpha | independent FPR | text-level FPR | 95% CI | |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for test, e in section.items():
        if not e.get("fitted"):
            lines.append(f"| {test} | not fitted: {e.get('reason', '')} | | | | | | |")
            continue
        for where in ("held_out", "other_corpus"):
            m = e.get(where)
            if not m or "text_null" not in m:
                continue
            label = "held out" if where == "held_out" else f"other: {m['corpus']}"
            for a, r in m["text_null"].items():
                ind = m["independent"][a]
                lo, hi = r["interval"]
                flag = "unsupported" if a in m["unsupported"] else ""
                lines.append(
                    f"| {test} | {label} ({m['n_texts']}) | {m['length']} | {a} | {ind['rate']:.3f} | "
                    f"{r['rate']:.3f} | [{lo:.3f}, {hi:.3f}] | {flag} |"
                )
    return lines
