"""``pmark check``: run every claim check and write the report (the toolkit's main job)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from proofs_checks._io import write_json_atomic
from proofs_checks._registry import Budget, get_checks
from proofs_checks._report import write_report
from proofs_checks._runner import run_checks

__all__ = ["main", "run"]

MARKER = ".pmark-report.json"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="pmark check",
        description="Verify, refute or correct every formal claim of the PMark paper; write a report directory "
        "(report.md, results.json, figures/). Exit code 0 when every check reaches its expected verdict and "
        "every negative control fails, 1 otherwise, 2 on a usage error.",
    )
    p.add_argument(
        "--quick", action="store_true", help="small Monte Carlo sizes (whole run within ~3 min on 2 cores)"
    )
    p.add_argument("--budget", type=float, default=1.0, help="scale the Monte Carlo sizes (default 1.0)")
    p.add_argument("--only", nargs="+", metavar="ID", help="run only these claim IDs (e.g. C7 X1)")
    p.add_argument(
        "--out", type=Path, default=Path("pmark-report"), help="report directory (default ./pmark-report)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the run (default 0)")
    p.add_argument("--force", action="store_true", help="overwrite an existing complete report in --out")
    p.add_argument("--list", action="store_true", help="list the checks and exit")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def _prepare_out(out: Path, force: bool) -> str | None:
    """Return an error message if ``out`` must not be written, else ``None``."""
    if out.exists() and not out.is_dir():
        return f"--out {out} exists and is not a directory"
    if not out.exists():
        return None
    marker = out / MARKER
    entries = [e for e in out.iterdir()]
    if entries and not marker.exists() and not force:
        return f"--out {out} is a non-empty directory that is not a pmark report; choose another --out or pass --force"
    if marker.exists():
        try:
            state = json.loads(marker.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            state = {}
        if state.get("complete") and not force:
            return f"a complete report already exists in {out}; pass --force to overwrite it or choose another --out"
    return None


def run(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.budget <= 0:
        print("pmark check: error: --budget must be > 0", file=sys.stderr)
        return 2
    try:
        checks = get_checks(args.only)
    except ValueError as exc:
        print(f"pmark check: error: {exc}", file=sys.stderr)
        return 2
    if args.list:
        for c in checks:
            print(f"{c.id:6s} [{c.expected}] {c.claim}")
        return 0
    out: Path = args.out
    err = _prepare_out(out, args.force)
    if err:
        print(f"pmark check: error: {err}", file=sys.stderr)
        return 2
    budget = Budget(scale=args.budget, quick=args.quick)
    meta = {
        "seed": args.seed,
        "budget": {"scale": budget.scale, "quick": budget.quick},
        "only": args.only,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    write_json_atomic(out / MARKER, {**meta, "complete": False})
    t0 = time.perf_counter()
    results = run_checks(checks, seed=args.seed, budget=budget, cache_dir=out, progress=not args.no_progress)
    meta["runtime_s"] = time.perf_counter() - t0
    report = write_report(out, results, meta)
    write_json_atomic(out / MARKER, {**meta, "complete": True})
    failed = [r for r in results if not r.get("passed")]
    width = max(len(r["id"]) for r in results)
    for r in results:
        nc = (r.get("negative_control") or {}).get("failed")
        print(
            f"{'PASS' if r.get('passed') else 'FAIL'}  {r['id']:{width}s}  {r.get('verdict'):9s} "
            f"(expected {r.get('expected_verdict')}; control {'failed' if nc else 'DID NOT FAIL'})  {r.get('measured')}"
        )
    print(
        f"\n{len(results) - len(failed)}/{len(results)} checks passed in {meta['runtime_s']:.1f} s; report: {report}"
    )
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    return run(argv)


if __name__ == "__main__":
    raise SystemExit(main())
