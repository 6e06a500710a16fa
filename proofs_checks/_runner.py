"""Run checks with a progress bar, caching each result so an interrupted run resumes.

The cache lives in a report folder the toolkit owns (:func:`proofs_checks._io.report_folder`): each result is
``cache/ID.json``, listed in the folder's manifest before it is written; a cache file that is not listed there is
never read nor replaced.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pmark_theory.infra.json import loads_strict
from pmark_theory.infra.owned import OwnedFolder
from pmark_theory.infra.ticker import Ticker, progress_shown, try_redraw
from proofs_checks._io import json_bytes, report_folder, to_jsonable, write_owned
from proofs_checks._registry import Budget, Check, check_key

__all__ = ["CACHE_DIR", "check_fingerprint", "run_check", "run_checks"]

CACHE_DIR = "cache"


@functools.lru_cache(maxsize=1)
def _toolkit_digest() -> str:
    """Hash of every source file of the packages a check can depend on (theory, simulations, checks)."""
    import pmark_theory
    import simulations

    h = hashlib.sha256()
    for pkg in (pmark_theory, simulations, sys.modules["proofs_checks"]):
        root = Path(pkg.__file__).parent
        for path in sorted(root.rglob("*.py")):
            h.update(str(path.relative_to(root.parent)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def check_fingerprint(check: Check) -> str:
    """Hash of the check's source and of the toolkit's source: a cached result is reused only if neither changed."""
    try:
        src = inspect.getsource(check.fn)
    except (OSError, TypeError):
        src = repr(check.fn)
    return hashlib.sha256(f"{_toolkit_digest()}\n{src}".encode()).hexdigest()[:16]


def run_check(check: Check, *, seed: int, budget: Budget) -> dict[str, Any]:
    """Run one check and return its JSON-ready result record (never raises: errors become a failed record)."""
    t0 = time.perf_counter()
    record: dict[str, Any] = {
        "id": check.id,
        "claim": check.claim,
        "paper_says": check.paper_says,
        "expected_verdict": check.expected,
        "seed": seed,
        "budget": {"scale": budget.scale, "quick": budget.quick},
    }
    try:
        out = check.fn(check_key(seed, check.id), budget)
        record.update(
            verdict=out.verdict,
            measured=out.measured,
            method=out.method,
            statistic=out.statistic,
            tolerance=out.tolerance,
            negative_control=asdict(out.control),
            plot_data=out.plot_data,
            error=None,
        )
        record["passed"] = bool(out.verdict == check.expected and out.control.failed)
    except Exception as exc:  # a crashing check is a failed check, reported, not a crashed run
        record.update(
            verdict="error",
            measured=f"error: {type(exc).__name__}: {exc}",
            method="",
            statistic={},
            tolerance="",
            negative_control={"description": "", "measured": "not run", "failed": False, "statistic": {}},
            plot_data=None,
            error="".join(traceback.format_exception(exc)),
            passed=False,
        )
    record["runtime_s"] = time.perf_counter() - t0
    return to_jsonable(record)


def _cache_relpath(check_id: str) -> str:
    return f"{CACHE_DIR}/{check_id}.json"


def _load_cached(folder: OwnedFolder, check_id: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """The cached result of ``check_id`` if the folder lists it and it was computed with ``params``."""
    rel = _cache_relpath(check_id)
    if not folder.owns(rel):
        return None
    try:
        doc = loads_strict((folder.path / rel).read_bytes(), rel)
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("params") != params or not isinstance(doc.get("result"), dict):
        return None
    return doc["result"]


def run_checks(
    checks: Sequence[Check],
    *,
    seed: int = 0,
    budget: Budget | None = None,
    cache_dir: Path | OwnedFolder | None = None,
    progress: bool | Callable[[int, int, str], None] = True,
) -> list[dict[str, Any]]:
    """Run ``checks`` and return their result records, in order.

    Args:
      checks: the checks (see :func:`proofs_checks.get_checks`).
      seed: the run's seed; each check uses ``fold_in(key(seed), crc32(id))``.
      budget: Monte Carlo sizes (default: full sizes, scale 1).
      cache_dir: a report directory (claimed as a ``pmark check`` report: see
        :func:`proofs_checks._io.report_folder`); each result is cached in ``cache_dir/cache/ID.json`` as soon as
        it is computed, and a cached result with the same seed, budget and check fingerprint is reused (resume).
      progress: ``True`` for a tqdm bar on stderr, ``False`` for none, or a callback ``(done, total, id)``.
    """
    budget = budget if budget is not None else Budget()
    folder = report_folder(cache_dir) if cache_dir is not None else None
    bar, ticker = None, None
    if (
        progress is True
    ):  # the average rate (smoothing=0) and a redraw every second: the ETA moves during a check
        from tqdm.auto import tqdm

        bar = tqdm(
            total=len(checks),
            desc="pmark check",
            unit="check",
            file=sys.stderr,
            dynamic_ncols=True,
            smoothing=0,
            disable=not progress_shown(),  # a terminal or PMARK_PROGRESS=1, as every pmark command
        )
        if not bar.disable:  # a redraw never blocks: it is skipped while the bar is busy
            ticker = Ticker(lambda: try_redraw(bar)).start()
    try:
        return _run_all(checks, seed, budget, folder, bar, progress)
    finally:
        if ticker is not None:
            ticker.stop()
        if bar is not None:
            bar.close()


def _run_all(
    checks: Sequence[Check],
    seed: int,
    budget: Budget,
    folder: OwnedFolder | None,
    bar: Any,
    progress: bool | Callable[[int, int, str], None],
) -> list[dict[str, Any]]:
    results = []
    for i, check in enumerate(checks):
        params = {
            "seed": seed,
            "budget": {"scale": budget.scale, "quick": budget.quick},
            "fingerprint": check_fingerprint(check),
        }
        rec = None
        if bar is not None:
            bar.set_postfix_str(check.id)
        if folder is not None:
            rec = _load_cached(folder, check.id, params)
            if rec is not None:
                rec = {**rec, "cached": True}
        if rec is None:
            rec = run_check(check, seed=seed, budget=budget)
            if folder is not None:
                write_owned(folder, _cache_relpath(check.id), json_bytes({"params": params, "result": rec}))
            rec = {**rec, "cached": False}
        results.append(rec)
        if bar is not None:
            bar.update(1)
        elif callable(progress):
            progress(i + 1, len(checks), check.id)
    return results
