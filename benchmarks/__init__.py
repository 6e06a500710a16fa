"""Benchmarks: each ``bench_NAME.py`` module exposes ``run(quick: bool = False) -> dict``.

Run all with ``bash run.sh bench`` (or ``python -m benchmarks [NAME ...] [--quick]``); each result is saved as
JSON in ``benchmarks/results/NAME.json`` (quick runs: ``benchmarks/results/quick/NAME.json``) and its goals are
printed with their verdicts. A result carries ``goals`` (measured value, usually a ratio from the same run,
against its target: ``benchmarks._common.goal``) and ``summary``; ``python -m benchmarks --table`` regenerates
the README table from the full results. Speed goals are reported, never asserted in timed tests.
"""
