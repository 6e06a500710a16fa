"""The evaluation loop: a report folder, resumable one text at a time, sharded over launcher ranks (issue 14).

The folder ``OUT``::

    config.json          what was evaluated (runs, models, prompts fingerprint, key fingerprint, seeds)
    units/RUN/IIIII-XXXXXXXX.json   one record per (run, document), written atomically when complete
    results.json         the tables with intervals (rank 0, from the units; byte-identical on resume / sharding)
    timing.json          wall times (not reproducible, so kept out of results.json)
    texts.jsonl          every prompt, human text, generated and attacked text with seeds and evidence
    report.md, figures/  the report (:mod:`pmark_impl.evaluate._report`, :mod:`pmark_impl.evaluate._figures`)

Resuming: a second run with the same ``config.json`` skips every unit already on disk; other settings are refused
unless ``force`` (which deletes the folder's evaluation files, never anything else). A folder that exists, is
not empty and holds no ``config.json`` is refused: it is not ours. Each rank holds an exclusive lock
``.lock-RANK`` for the whole run, so two evaluations on one folder cannot interleave their writes.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pmark_impl.evaluate._aggregate import aggregate, clean_json, timing
from pmark_impl.evaluate._distributed import World, agree, barrier
from pmark_impl.evaluate._units import EvalContext, run_unit
from pmark_theory._files import write_atomic
from pmark_theory._validate import PMarkValueError

__all__ = ["OUTPUT_FILES", "EvaluationError", "check_ours", "prepare_folder", "run_evaluation", "unit_path"]

#: Files (and folders) an evaluation writes at the top of its folder: what ``force`` may delete.
OUTPUT_FILES = ("config.json", "results.json", "timing.json", "texts.jsonl", "report.md", "units", "figures")


#: Permission bits of the files that hold per-sentence evidence (units, texts.jsonl): owner only, like key files.
EVIDENCE_MODE = 0o600


class EvaluationError(PMarkValueError):
    """A report folder that cannot be used (not ours, other settings, locked by another run)."""


def _dumps(obj: Any) -> bytes:
    return (json.dumps(clean_json(obj), indent=1, ensure_ascii=False, allow_nan=False) + "\n").encode()


def unit_path(out: Path, run_id: str, index: int, doc_id: str) -> Path:
    """``out/units/RUN/IIIII-XXXXXXXX.json`` (index in the prompt set, 8 hex digits of the document id)."""
    digest = hashlib.sha256(doc_id.encode()).hexdigest()[:8]
    return out / "units" / run_id / f"{index:05d}-{digest}.json"


def _diff(old: dict, new: dict) -> str:
    keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    return ", ".join(keys[:6]) or "(none)"


def check_ours(out: Path) -> None:
    """Refuse ``out`` if it is a file, or a non-empty folder without an evaluation's ``config.json``.

    Raises:
      EvaluationError: as above (lock files ``.lock-RANK`` of an evaluation do not count).
    """
    if out.exists() and not out.is_dir():
        raise EvaluationError(f"--out {out} exists and is not a folder")
    if out.is_dir() and not (out / "config.json").is_file():
        if any(not p.name.startswith(".lock-") for p in out.iterdir()):
            raise EvaluationError(
                f"--out {out} is not empty and holds no evaluation (config.json): choose another"
            )


def prepare_folder(out: Path, identity: dict[str, Any], force: bool) -> None:
    """Create or check the report folder (rank 0 only).

    Raises:
      EvaluationError: ``out`` is a file, not ours, or holds another evaluation (without ``force``).
    """
    check_ours(out)
    cfg = out / "config.json"
    if cfg.is_file():
        try:
            old = json.loads(cfg.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise EvaluationError(f"{cfg} is unreadable ({exc}); use --force to start again") from None
        if old == clean_json(identity):
            return  # resume
        if not force:
            raise EvaluationError(
                f"{out} holds an evaluation with other settings (differ: {_diff(old, clean_json(identity))}); "
                "use --force to replace it or choose another --out"
            )
        for name in OUTPUT_FILES:
            p = out / name
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            elif p.is_file():
                p.unlink()
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(cfg, _dumps(identity), force=True, what="config.json")


@contextlib.contextmanager
def _lock(out: Path, rank: int) -> Iterator[None]:
    path = out / f".lock-{rank}"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise EvaluationError(f"another evaluation is running on {out} (lock {path.name})") from None
        yield
    finally:
        os.close(fd)


def _read_unit(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _units_of(out: Path, ctx: EvalContext, documents: Sequence[Any]) -> dict[str, list[dict]]:
    units: dict[str, list[dict]] = {}
    for run in ctx.config.runs:
        recs = []
        for i, doc in enumerate(documents):
            rec = _read_unit(unit_path(out, run.run_id, i, doc.doc_id))
            if rec is None:
                raise EvaluationError(f"unit {run.run_id}/{doc.doc_id} is missing or unreadable: run again")
            recs.append(rec)
        units[run.run_id] = recs
    return units


def run_evaluation(
    ctx: EvalContext,
    documents: Sequence[Any],
    out: str | os.PathLike[str],
    identity: dict[str, Any],
    *,
    world: World | None = None,
    force: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any] | None:
    """Run (or resume) the evaluation into folder ``out``; rank 0 writes the report.

    Args:
      ctx: models, key and configuration.
      documents: the prompt set (:class:`pmark_impl.evaluate._prompts.EvalDocument`).
      out: the report folder.
      identity: ``config.json``'s content (what makes two evaluations the same).
      world: this process's rank (default: one process).
      force: replace an evaluation with other settings in ``out``.
      progress: called ``(label, done, total)`` after each unit of this rank (skipped units included).

    Returns:
      The results document on rank 0, ``None`` on other ranks.

    Raises:
      EvaluationError: see :func:`prepare_folder`; a rank failed.
    """
    world = world or World()
    out = Path(out)
    err: BaseException | None = None
    if world.rank == 0:  # before taking a lock: a folder that is not ours gets no lock file either
        try:
            check_ours(out)
            out.mkdir(parents=True, exist_ok=True)
        except (EvaluationError, OSError) as exc:
            err = exc
    if not agree(world, err is None):
        raise err if err is not None else EvaluationError("rank 0 could not create the report folder")
    with _lock(out, world.rank):  # held from before the folder is prepared (--force deletes under it)
        if world.rank == 0:
            try:
                prepare_folder(out, identity, force)
            except (EvaluationError, OSError) as exc:
                err = exc
        if not agree(world, err is None):
            raise err if err is not None else EvaluationError("rank 0 could not prepare the report folder")
        if world.rank != 0 and _read_unit(out / "config.json") != clean_json(identity):
            raise EvaluationError(f"rank {world.rank}: {out}/config.json differs from this rank's settings")
        runs = ctx.config.runs
        lm_run = next((r for r in runs if r.scheme == "none"), None)
        mine = list(world.shard(len(documents)))
        total, done = len(runs) * len(mine), 0
        failure: BaseException | None = None
        try:
            for run in runs:
                for i in mine:
                    doc = documents[i]
                    path = unit_path(out, run.run_id, i, doc.doc_id)
                    if _read_unit(path) is None:
                        lm_text = None
                        if lm_run is not None and run is not lm_run:
                            lm_rec = _read_unit(unit_path(out, lm_run.run_id, i, doc.doc_id))
                            lm_text = lm_rec["text"] if lm_rec is not None else None
                        record = run_unit(ctx, run, doc, lm_text)
                        path.parent.mkdir(parents=True, exist_ok=True)
                        write_atomic(path, _dumps(record), force=True, mode=EVIDENCE_MODE, what="unit record")
                    done += 1
                    if progress is not None:
                        progress(run.run_id, done, total)
        except Exception as exc:  # the other ranks must not wait for this one forever
            failure = exc
        if not agree(world, failure is None):
            if failure is not None:
                raise failure
            raise EvaluationError("another rank failed; its error is in its own output")
        if world.rank != 0:
            barrier(world)
            return None
        units = _units_of(out, ctx, documents)
        results = aggregate(ctx.config, units, identity)
        write_atomic(out / "results.json", _dumps(results), force=True, what="results.json")
        write_atomic(out / "timing.json", _dumps(timing(ctx.config, units)), force=True, what="timing.json")
        lines = [  # wall times are not reproducible: they are in timing.json only
            json.dumps(clean_json({k: v for k, v in u.items() if k != "seconds"}), ensure_ascii=False)
            for run in runs
            for u in units[run.run_id]
        ]
        data = ("\n".join(lines) + "\n").encode()
        write_atomic(out / "texts.jsonl", data, force=True, mode=EVIDENCE_MODE, what="texts.jsonl")
        _report(out, results)
        barrier(world)
        return results


def _report(out: Path, results: dict[str, Any]) -> None:
    from pmark_impl.evaluate._report import write_report

    timing_doc = json.loads((out / "timing.json").read_text(encoding="utf-8"))
    write_report(results, out, timing=timing_doc)
