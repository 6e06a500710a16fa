"""Run the benchmarks: ``python -m benchmarks [NAME ...] [--quick] [--results DIR]``, or ``--table``.

Every ``bench_NAME.py`` module of this folder is a benchmark with ``run(quick: bool) -> dict``. Each result is
saved as JSON — ``benchmarks/results/NAME.json`` for a full run, ``benchmarks/results/quick/NAME.json`` for a
``--quick`` run (small sizes, a smoke run; it never overwrites a full result) — and each of its goals is printed
with its verdict (met / NOT met / not measured). Goals are reported, never asserted: the exit status is 0 unless
a benchmark crashes. A benchmark whose model or library is absent prints one ``skipped`` line.
``--table`` regenerates the README's table from the full results (``benchmarks/readme_table.py``).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import BenchmarkSkipped, format_value
from benchmarks.readme_table import README, RESULTS, update_readme

PREFIX = "bench_"
_OURS = ("benchmarks", "pmark_theory", "simulations", "proofs_checks", "pmark_impl")


def discover(folder: Path = Path(__file__).parent) -> list[str]:
    """Names of the benchmarks in ``folder``: its modules ``bench_NAME.py``, as ``NAME``, sorted."""
    return sorted(
        m.name[len(PREFIX) :]
        for m in pkgutil.iter_modules([str(folder)])
        if m.name.startswith(PREFIX) and not m.ispkg and len(m.name) > len(PREFIX)
    )


def _write_json_atomic(path: Path, obj: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(obj, fh, indent=2, default=float, ensure_ascii=False)
            fh.write("\n")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def result_path(name: str, quick: bool, results_dir: Path = RESULTS) -> Path:
    """Where the result of benchmark ``name`` goes: ``results_dir/NAME.json``, quick runs under ``quick/``."""
    return (results_dir / "quick" if quick else results_dir) / f"{name}.json"


def goal_lines(result: dict[str, Any]) -> list[str]:
    """One line per goal of ``result``: ``row — name: value (goal op target): met | NOT met | not measured``."""
    lines = []
    for g in result.get("goals", []):
        verdict = {True: "met", False: "NOT met", None: "not measured"}[g["met"]]
        lines.append(
            f"  {g['row']} — {g['name']}: {format_value(g['value'], g['unit'])} "
            f"(goal {g['op']} {format_value(g['goal'], g['unit'])}): {verdict}"
        )
    return lines


def run_benchmark(name: str, quick: bool, results_dir: Path = RESULTS) -> dict[str, Any] | None:
    """Run ``bench_NAME.run(quick)``, save its JSON and print its goals; ``None`` (one line printed) if skipped.

    Args:
      name: a name from :func:`discover`.
      quick: small sizes; the JSON goes to ``results_dir/quick/``.
      results_dir: the results folder.

    Returns:
      The saved result, or ``None`` when the benchmark cannot run here (missing library or model).
    """
    try:
        mod = importlib.import_module(f"benchmarks.{PREFIX}{name}")
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] in _OURS:
            raise
        print(f"== benchmark {name}: skipped (needs {exc.name}, not installed) ==", flush=True)
        return None
    print(f"== benchmark {name}{' (quick)' if quick else ''} ==", flush=True)
    t0 = time.perf_counter()
    try:
        result = mod.run(quick=quick)
    except BenchmarkSkipped as exc:
        print(f"== benchmark {name}: skipped ({exc}) ==", flush=True)
        return None
    result = {
        "benchmark": name,
        "quick": quick,
        "date": time.strftime("%Y-%m-%d"),
        "machine": {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
        "wall_seconds": time.perf_counter() - t0,
        **result,
    }
    path = result_path(name, quick, results_dir)
    _write_json_atomic(path, result)
    print("\n".join(goal_lines(result)), flush=True)
    print(f"  ({result['wall_seconds']:.0f} s; saved {path})", flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m benchmarks``; returns the exit status."""
    names = discover()
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument(
        "names", nargs="*", metavar="NAME", help=f"benchmarks to run (default: all of {names})"
    )
    parser.add_argument("--quick", action="store_true", help="small sizes (results in RESULTS/quick/)")
    parser.add_argument("--results", type=Path, default=RESULTS, help="results folder (default %(default)s)")
    parser.add_argument(
        "--table", action="store_true", help="regenerate the README table from RESULTS; run nothing"
    )
    parser.add_argument("--readme", type=Path, default=README, help="README updated by --table")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(names))
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; choose from {names}")
    if args.table:
        if args.names or args.quick:
            parser.error("--table runs no benchmark: give no NAME and no --quick")
        changed = update_readme(args.readme, args.results)
        print(f"{args.readme}: benchmark table {'updated' if changed else 'already up to date'}")
        return 0
    for name in args.names or names:
        run_benchmark(name, args.quick, args.results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
