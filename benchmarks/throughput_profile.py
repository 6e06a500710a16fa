"""Where generation time goes, from the throughput benchmark's own engine counters (issue 40).

``benchmarks/bench_throughput.py`` records, for each batched run, the engine's timers (``DecodeEngine.stats``:
``forward_s`` — the model's decode passes, ``prefill_s`` — context prefills, ``sample_s`` — the filtered law's
inverse CDF over every live row with its per-row uniforms, ``run_s`` — the engine's whole loop) beside the run's
wall time. This module splits each run's wall time into

* **forward** and **prefill** (the model),
* **sampling** (``sample_s``),
* **engine Python** (``run_s`` minus the three above: per-row sentence-boundary checks, slot bookkeeping, refills),
* **encoder** (``encoder_s``: the sentence encoder's calls, timed by the benchmark around ``encode``),
* **schemes and driver** (wall minus ``run_s`` minus the encoder: the schemes' logic between engine calls, the
  texts' threads and turns; the benchmark generates and does not detect),

and renders the tables that ``docs/throughput.md`` holds between its ``profile`` markers (SmolLM2 from the
throughput benchmark; the tiny LM from ``benchmarks/study_engine_ceiling.py``);
``tests/test_throughput_profile.py`` fails when the two differ.

    .venv/bin/python -m benchmarks.throughput_profile           # print the table
    .venv/bin/python -m benchmarks.throughput_profile --write   # rewrite it in docs/throughput.md
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pmark_theory.infra.files import write_atomic

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "throughput.json"
#: The engine's own ceiling: the same split on the tiny LM, whose forward pass is nearly free
#: (``benchmarks/study_engine_ceiling.py``).
CEILING = ROOT / "benchmarks" / "results" / "studies" / "engine_ceiling.json"
SOURCES = {"SmolLM2-135M": RESULTS, "the tiny LM (the engine's ceiling)": CEILING}
DOC = ROOT / "docs" / "throughput.md"
START, END = "<!-- profile:start (benchmarks/throughput_profile.py) -->", "<!-- profile:end -->"
PARTS = ("forward", "prefill", "sampling", "engine Python", "encoder", "schemes and driver")


def split(run: dict[str, Any]) -> dict[str, float]:
    """One run's wall seconds split into :data:`PARTS` (seconds; they add up to the wall time)."""
    e, wall = run["engine"], float(run["batched"]["seconds"])
    model = {"forward": e["forward_s"], "prefill": e["prefill_s"], "sampling": e["sample_s"]}
    return {
        **model,
        "engine Python": e["run_s"] - sum(model.values()),
        "encoder": e["encoder_s"],
        "schemes and driver": wall - e["run_s"] - e["encoder_s"],
    }


def table(results: dict[str, Any], source: Any = "benchmarks/results/throughput.json") -> str:
    """The markdown table of every run's split, in percent of its wall time, with the setting it was measured in."""
    head = f"| run | wall (s) | {' | '.join(PARTS)} |"
    lines = [head, "|" + "---|" * (len(PARTS) + 2)]
    for name, run in results["runs"].items():
        parts, wall = split(run), float(run["batched"]["seconds"])
        cells = " | ".join(f"{100 * parts[p] / wall:.1f}%" for p in PARTS)
        lines.append(f"| {name} | {wall:.1f} | {cells} |")
    load = ", ".join(f"{x:.2f}" for x in results.get("load_average", []))
    lines.append("")
    lines.append(
        f"Measured {results['date']} on "
        + (
            f"{results['machine']['cpus']} CPU cores"
            if results["device"] == "cpu"
            else str(results["device"])
        )
        + f", {results['model']}, {results['texts_per_batch']} texts per batch, load average {load} "
        f"(`{source}`)."
    )
    ratios = results.get("batched_over_per_row")
    if ratios:
        goal = results.get("goal", {}).get("batched_over_per_row")
        each = ", ".join(f"{name} {r:.2f}×" for name, r in ratios.items())
        lines.append("")
        lines.append(
            f"Candidates per second of the batched token loop over the per-row loop, same run, fastest of "
            f"{results.get('repeats', 1)} repeats each: {each}"
            + (f" (issue 40's goal: {goal:g}×)." if goal else ".")
        )
    bound = results.get("loop_free_bound")
    if bound:
        each = ", ".join(f"{name} {r:.2f}×" for name, r in bound.items())
        lines.append("")
        lines.append(
            "At most what any token loop can give in that run — sampling and the engine's Python free, the parts "
            f"both routes share (forward call, prefills, encoder, schemes, the texts' turns) as measured: {each}."
        )
    by_texts = results.get("scale")
    if by_texts:
        texts = " / ".join(str(t) for t in by_texts["texts"])
        each = "; ".join(
            f"{name} {' / '.join(f'{r:.0f}' for r in rates)}"
            for name, rates in by_texts["candidates_per_second"].items()
        )
        lines.append("")
        lines.append(
            f"Candidates per second of the batched route (free forward) at {texts} texts per group, 8 slots per "
            f"text (a GPU's sizing), fastest of {results.get('repeats', 1)}: {each}."
        )
    return "\n".join(lines)


def block(results: dict[str, dict[str, Any]] | None = None) -> str:
    """The marked block of ``docs/throughput.md``: one table per source (default: :data:`SOURCES`, read)."""
    if results is None:
        results = {name: json.loads(path.read_text(encoding="utf-8")) for name, path in SOURCES.items()}
    parts = []
    for name, res in results.items():
        source = SOURCES[name].relative_to(ROOT) if name in SOURCES else "given"
        parts.append(f"**{name}**\n\n{table(res, source)}")
    return f"{START}\n" + "\n\n".join(parts) + f"\n{END}"


def current() -> str:
    """The marked block as ``docs/throughput.md`` holds it now."""
    text = DOC.read_text(encoding="utf-8")
    return text[text.index(START) : text.index(END) + len(END)]


def main(argv: list[str]) -> int:
    """Print the table, or with ``--write`` put it in ``docs/throughput.md`` (between the markers)."""
    if argv == ["--write"]:
        text = DOC.read_text(encoding="utf-8")
        write_atomic(DOC, text.replace(current(), block()).encode(), force=True, what="docs/throughput.md")
        return 0
    if argv:
        print("usage: python -m benchmarks.throughput_profile [--write]", file=sys.stderr)
        return 2
    print(block())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
