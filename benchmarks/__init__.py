"""Benchmarks: each ``bench_*.py`` module exposes ``run(quick: bool = False) -> dict``.

Run all with ``bash run.sh bench`` (or ``python -m benchmarks [NAME ...] [--quick]``); every result is printed
and saved as JSON in ``benchmarks/results/NAME.json``. Speed goals are reported as ratios measured in the
same run, never asserted in timed tests.
"""
