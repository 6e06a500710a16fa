"""How long the README's commands take, measured with the machine and its load (issue 38).

Each command runs as a child process in a fresh temporary folder (the repository's ``.venv``, no cached report),
and is recorded with its wall time, its CPU time (user + system of the child and everything it started: the figure
that does not depend on how busy the machine is), the load average at its start and end, and the machine (CPU
model, cores). The README and the commands' ``--help`` state these figures through :func:`phrase`;
``tests/test_readme_timings.py`` fails when they drift from ``benchmarks/results/studies/timings.json``.

Wall time scales with load; on a machine with ``c`` free cores, expect roughly ``cpu / min(c, used)`` where
``used = cpu / wall`` is the parallelism the run reached here.

    .venv/bin/python -m benchmarks.measure_timings [NAME ...]   # default: every command in COMMANDS
"""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pmark_theory.infra.files import write_atomic

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "studies" / "timings.json"
VENV = ROOT / ".venv" / "bin"

#: name -> (the command as the README writes it, argv run here). ``{out}`` is a fresh folder.
COMMANDS: dict[str, tuple[str, list[str]]] = {
    "check_quick": ("pmark check --quick", [str(VENV / "pmark"), "check", "--quick", "--out", "{out}"]),
    "check": ("pmark check", [str(VENV / "pmark"), "check", "--out", "{out}"]),
    "demo": ("pmark demo", [str(VENV / "pmark"), "demo"]),
    "evaluate": ("bash run.sh evaluate", ["bash", str(ROOT / "run.sh"), "evaluate", "--out", "{out}"]),
}


def machine() -> dict[str, Any]:
    """The CPU model and core count of this machine (what a time was measured on)."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count(), "system": platform.system()}


def measure(name: str) -> dict[str, Any]:
    """Run command ``name`` once; its wall and CPU seconds, load average and exit status."""
    shown, argv = COMMANDS[name]
    with tempfile.TemporaryDirectory(prefix=f"pmark-timing-{name}-") as tmp:
        out = str(Path(tmp) / "out")
        argv = [a.replace("{out}", out) for a in argv]
        env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
        }
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        proc = subprocess.run(argv, cwd=tmp, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "command": shown,
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "load_1min": [round(load0, 2), round(os.getloadavg()[0], 2)],
        "returncode": proc.returncode,
        "machine": machine(),  # per command: a partial re-measurement on another machine keeps each one's own
        **({} if proc.returncode == 0 else {"stderr_tail": proc.stderr[-2000:]}),
    }


def clock(seconds: float) -> str:
    """``seconds`` as ``M:SS`` (or ``H:MM:SS``)."""
    s = round(seconds)
    h, rem = divmod(s, 3600)
    return f"{h}:{rem // 60:02d}:{rem % 60:02d}" if h else f"{rem // 60}:{rem % 60:02d}"


def phrase(name: str, results: dict[str, Any] | None = None) -> str:
    """How the README and ``--help`` state command ``name``'s time: wall and CPU time with the machine.

    E.g. ``"measured 1:16 wall, 1:34 CPU on 2 AMD EPYC cores (load 0.8 at start)"``: the machine the command was
    measured on, and the 1-minute load average when it started (what else was running; the command's own load
    is in its CPU time).
    """
    results = load() if results is None else results
    rec = results["commands"][name]
    host = rec["machine"]
    return (
        f"measured {clock(rec['wall_s'])} wall, {clock(rec['cpu_s'])} CPU on {host['cores']} {host['cpu']} cores "
        f"(load {rec['load_1min'][0]:.1f} at start)"
    )


def load() -> dict[str, Any]:
    """The stored measurements (``benchmarks/results/studies/timings.json``)."""
    return json.loads(RESULTS.read_text(encoding="utf-8"))


def main(names: list[str]) -> int:
    """Measure ``names`` (default: all), merge them into the stored results and print them."""
    unknown = sorted(set(names) - set(COMMANDS))
    if unknown:
        print(
            f"measure_timings: unknown command(s) {unknown}; choose from {sorted(COMMANDS)}", file=sys.stderr
        )
        return 2
    results = load() if RESULTS.exists() else {"commands": {}}
    for name in names or list(COMMANDS):
        print(f"measure_timings: {name} …", file=sys.stderr, flush=True)
        rec = measure(name)
        print(json.dumps({name: rec}), flush=True)
        if rec["returncode"] != 0:
            print(f"measure_timings: {name} failed (exit {rec['returncode']}); not stored", file=sys.stderr)
            return 1
        results["commands"][name] = rec
        # atomic (the toolkit's writer): an interrupted run keeps the previous measurements
        write_atomic(RESULTS, (json.dumps(results, indent=1) + "\n").encode(), force=True, what="timings")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
