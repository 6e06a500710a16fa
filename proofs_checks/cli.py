"""``pmark check``: run every claim check and write the report (the toolkit's main job).

Exit codes: 0 every check reached its expected verdict and every negative control was caught (the same pipeline
run on mutated code failed); 1 otherwise;
2 a usage error (one line ``pmark check: error: …`` on stderr), including an output directory that another
run is writing (``<out>/.lock`` is held with ``flock``); 130 interrupted (Ctrl-C): results computed so far
stay cached in ``<out>/cache`` and a rerun resumes from them.

On stdout: one line per check, fitted to the terminal (:func:`proofs_checks._console.check_lines`: status, ID,
verdict, ``control caught`` / ``control NOT caught``, the start of what it measured), the run's time and the
report's path, and last a one-line tally of verdicts and controls (:func:`proofs_checks._console.tally`).

The output directory is a folder the toolkit owns (:mod:`pmark_theory.infra.owned`, kind
:data:`~proofs_checks._io.REPORT_KIND`): a new or empty directory, or a report written by ``pmark check``. A
non-empty directory that is not one is refused before anything is written, with or without ``--force``.
``--force`` replaces a complete report: it deletes only the files the earlier run listed in the folder's manifest
(its cached results excepted, which stay valid and are reused), never a file the user added there. Reports of the
previous version (``.pmark-report.json`` only) are adopted when every file in them is one it wrote
(:data:`~proofs_checks._io.LEGACY_REPORT`), refused otherwise.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
import time
from pathlib import Path

from pmark_theory.infra.json import loads_strict
from pmark_theory.infra.owned import FolderError, OwnedFolder, probe_folder
from proofs_checks._cli_common import (
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    LOCK_NAME,
    MAX_SEED,
    OneLineArgumentParser,
    OutputInUseError,
    OutputLock,
    finite_float,
    int_in_range,
    print_error,
)
from proofs_checks._console import check_lines, tally
from proofs_checks._io import (
    LEGACY_REPORT,
    REPORT_KIND,
    STATE_FILE,
    json_bytes,
    report_folder,
    write_owned,
)
from proofs_checks._registry import Budget, get_checks
from proofs_checks._report import write_report
from proofs_checks._runner import CACHE_DIR, run_checks

__all__ = ["INTERRUPTED_MESSAGE", "MAX_SEED", "main", "run"]

PROG = "pmark check"
#: The run-state file of a report (``complete``, seed, budget): the previous version's only marker.
MARKER = STATE_FILE
#: Printed on stderr when Ctrl-C stops a run (exit status 130).
INTERRUPTED_MESSAGE = "pmark: interrupted (completed results are cached; rerun to resume)"


def _parser() -> argparse.ArgumentParser:
    p = OneLineArgumentParser(
        prog=PROG,
        description="Verify, refute or correct every formal claim of the PMark paper; write a report directory "
        "(report.md, results.json, figures/). Exit code 0 when every check reaches its expected verdict and "
        "every negative control fails, 1 otherwise, 2 on a usage error. The whole run: "
        "measured 5:52 wall, 7:03 CPU on 2 AMD EPYC cores (load 1.7 at start); "
        "the bar's ETA measures this machine (benchmarks/measure_timings.py).",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="small Monte Carlo sizes (the whole run: "
        "measured 1:16 wall, 1:34 CPU on 2 AMD EPYC cores (load 0.8 at start))",
    )
    p.add_argument(
        "--budget",
        type=finite_float(0.0, 1e6, open_lo=True),
        default=1.0,
        help="scale the Monte Carlo sizes, a finite number in (0, 1e6] (default 1.0)",
    )
    p.add_argument("--only", nargs="+", metavar="ID", help="run only these claim IDs (e.g. C7 X1)")
    p.add_argument(
        "--out", type=Path, default=Path("pmark-report"), help="report directory (default ./pmark-report)"
    )
    p.add_argument(
        "--seed",
        type=int_in_range(0, MAX_SEED),
        default=0,
        help=f"seed of the run, 0..{MAX_SEED} (default 0)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace a complete report in --out (only the files pmark wrote there; cached results are reused)",
    )
    p.add_argument("--list", action="store_true", help="list the checks and exit")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def _complete(out: Path) -> bool:
    """Whether ``out`` holds a report whose run finished (its state file says ``"complete": true``)."""
    path = out / MARKER
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return False
        doc = loads_strict(path.read_bytes(), MARKER)
    except (OSError, ValueError):
        return False  # no state, or a damaged one: an unfinished report (it is rewritten)
    return isinstance(doc, dict) and doc.get("complete") is True


def _prepare_out(out: Path, force: bool) -> str | None:
    """Return an error message if ``out`` must not be written, else ``None`` (reads only, writes nothing)."""
    try:
        state = probe_folder(out, REPORT_KIND, ignore=(LOCK_NAME,), legacy=LEGACY_REPORT, what="--out")
    except FolderError as exc:
        return str(exc)
    if state in ("owned", "legacy") and _complete(out) and not force:
        return (
            f"a complete report already exists in {out}; pass --force to overwrite it or choose another --out"
        )
    return None


def _claim(out: Path, force: bool) -> OwnedFolder:
    """Claim ``out`` (under its lock) and, with ``force``, delete the earlier report's files but its cache."""
    complete = _complete(out)
    folder = report_folder(out, what="--out")
    if force and complete:
        folder.clear(keep=lambda rel: rel.startswith(f"{CACHE_DIR}/"))
    folder.remove_debris()
    return folder


def run(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the checks; return the exit code (Ctrl-C propagates as ``KeyboardInterrupt``)."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a bad value (2, one line already printed)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    try:
        checks = get_checks(args.only)
    except ValueError as exc:
        print_error(PROG, exc)
        return EXIT_USAGE
    if args.list:
        for c in checks:
            print(f"{c.id:6s} [{c.expected}] {c.claim}")
        return 0
    out: Path = args.out
    err = _prepare_out(out, args.force)
    if err:
        print_error(PROG, err)
        return EXIT_USAGE
    lock = OutputLock(out)
    try:
        lock.acquire()
    except OutputInUseError as exc:
        print_error(PROG, exc)
        return EXIT_USAGE
    except OSError as exc:
        print_error(PROG, f"cannot write --out {out}: {exc.strerror or exc}")
        return EXIT_USAGE
    try:
        err = _prepare_out(out, args.force)  # again, now that no other run can change it
        if err:
            print_error(PROG, err)
            return EXIT_USAGE
        try:
            folder = _claim(out, args.force)
        except FolderError as exc:
            print_error(PROG, exc)
            return EXIT_USAGE
        except OSError as exc:
            print_error(PROG, f"cannot write --out {out}: {exc.strerror or exc}")
            return EXIT_USAGE
        try:
            return _run_locked(args, checks, folder)
        except FolderError as exc:  # a file the user put in the report folder meanwhile: left alone
            print_error(PROG, exc)
            return EXIT_USAGE
    finally:
        lock.release()


def _run_locked(args: argparse.Namespace, checks: list, folder: OwnedFolder) -> int:
    budget = Budget(scale=args.budget, quick=args.quick)
    meta = {
        "seed": args.seed,
        "budget": {"scale": budget.scale, "quick": budget.quick},
        "only": args.only,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    write_owned(folder, MARKER, json_bytes({**meta, "complete": False}))
    t0 = time.perf_counter()
    results = run_checks(
        checks, seed=args.seed, budget=budget, cache_dir=folder, progress=not args.no_progress
    )
    meta["runtime_s"] = time.perf_counter() - t0
    report = write_report(folder, results, meta)
    write_owned(folder, MARKER, json_bytes({**meta, "complete": True}))
    failed = [r for r in results if not r.get("passed")]
    for line in check_lines(results):
        print(line)
    print(
        f"\n{len(results) - len(failed)}/{len(results)} checks passed in {meta['runtime_s']:.1f} s; "
        f"details: {report}"
    )
    print(tally(results))
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    """``pmark check`` entry point: :func:`run`, with Ctrl-C turned into one line and exit status 130."""
    try:
        return run(argv)
    except KeyboardInterrupt:
        sys.stdout.flush()
        print(INTERRUPTED_MESSAGE, file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())
