"""Run the benchmarks: ``python -m benchmarks [NAME ...] [--quick]``."""

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

RESULTS = Path(__file__).parent / "results"


def _write_json_atomic(path: Path, obj: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump(obj, fh, indent=2, default=float)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    names = sorted(m.name[len("bench_") :] for m in pkgutil.iter_modules([str(Path(__file__).parent)]))
    names = [n for n in names if n]
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("names", nargs="*", choices=[*names, []], help="benchmarks to run (default: all)")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args(argv)
    selected = args.names or names
    for name in selected:
        mod = importlib.import_module(f"benchmarks.bench_{name}")
        print(f"== benchmark {name} ==", flush=True)
        t0 = time.perf_counter()
        result = mod.run(quick=args.quick)
        result = {
            "benchmark": name,
            "quick": args.quick,
            "machine": {
                "python": sys.version.split()[0],
                "platform": platform.platform(),
                "cpus": os.cpu_count(),
            },
            "wall_seconds": time.perf_counter() - t0,
            **result,
        }
        _write_json_atomic(RESULTS / f"{name}.json", result)
        print(json.dumps(result, indent=2, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
