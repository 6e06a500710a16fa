"""The evaluation loop: a report folder, resumable one text at a time, sharded over launcher ranks (issue 14).

The folder ``OUT``::

    config.json          what was evaluated (runs, models, prompts fingerprint, key fingerprint, seeds)
    units/RUN/IIIII-XXXXXXXX.json   one record per (run, document), written atomically when complete
    results.json         the tables with intervals (rank 0, from the units; byte-identical on resume / sharding)
    timing.json          wall times (not reproducible, so kept out of results.json)
    texts.jsonl          every prompt, human text, generated and attacked text with seeds and evidence
    report.md, figures/  the report (:mod:`pmark_impl.evaluate._report`, :mod:`pmark_impl.evaluate._figures`)
    tables/              every table of the report as CSV and LaTeX (:mod:`pmark_impl.evaluate._tables`)

It is a folder the toolkit owns (:mod:`pmark_impl.evaluate._folder`): its marker ``.pmark-folder.json`` lists
every file above as it is written (the units of every rank are listed by rank 0 before any is written). A
non-empty folder without the marker is refused, with or without ``force``, before anything is written there.

Resuming: a second run with the same ``config.json`` skips every unit already on disk; other settings are refused
unless ``force``, which deletes the files the folder lists and nothing else (a file the user added survives). A
folder whose listed ``config.json`` is missing is refused too without ``force`` (its units are hours of work).
The temporaries of an interrupted run (``.NAME.XXXXXXXX.tmp`` of a listed file) are deleted before it resumes;
no other file is. Each rank holds an exclusive lock ``.lock-RANK`` for the whole run, rank 0 from before the
folder is prepared (so ``--force`` deletes under it), so two evaluations on one folder cannot interleave their
writes; a ``.lock-RANK`` that is a link or holds anything but a pid is refused, never truncated.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pmark_impl.evaluate._aggregate import aggregate, clean_json, timing
from pmark_impl.evaluate._distributed import World, agree, barrier
from pmark_impl.evaluate._folder import KIND, LOCKS, check_ours, evaluation_folder
from pmark_impl.evaluate._units import EvalContext, generate_group, run_unit
from pmark_theory._validate import PMarkValueError
from pmark_theory.infra.json import loads_strict
from pmark_theory.infra.lock import ForeignLockError, OutputInUseError, take_lock
from pmark_theory.infra.owned import OwnedFolder, open_folder

__all__ = [
    "EVIDENCE_MODE",
    "EvaluationError",
    "check_ours",
    "prepare_folder",
    "rank_units",
    "run_evaluation",
    "same_settings",
    "unit_path",
    "unit_relpath",
]

#: Permission bits of the files that hold per-sentence evidence (units, texts.jsonl): owner only, like key files.
EVIDENCE_MODE = 0o600
CONFIG = "config.json"


class EvaluationError(PMarkValueError):
    """A report folder that cannot be used (other settings, locked by another run, a rank failed)."""


def _dumps(obj: Any) -> bytes:
    return (json.dumps(clean_json(obj), indent=1, ensure_ascii=False, allow_nan=False) + "\n").encode()


def unit_relpath(run_id: str, index: int, doc_id: str) -> str:
    """``units/RUN/IIIII-XXXXXXXX.json`` (index in the prompt set, 8 hex digits of the document id)."""
    digest = hashlib.sha256(doc_id.encode()).hexdigest()[:8]
    return f"units/{run_id}/{index:05d}-{digest}.json"


def unit_path(out: Path, run_id: str, index: int, doc_id: str) -> Path:
    """``out/units/RUN/IIIII-XXXXXXXX.json`` (see :func:`unit_relpath`)."""
    return Path(out) / unit_relpath(run_id, index, doc_id)


def _diff(old: dict, new: dict) -> str:
    keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    return ", ".join(keys[:6]) or "(none)"


def same_settings(old: Any, new: Any) -> bool:
    """Whether a folder's ``config.json`` (``old``) is the evaluation ``new`` describes.

    Equal, or ``old`` written before the prompt filter was recorded (no ``prompts.min_sentences``; issue 28) and
    equal to ``new`` without it: the documents are pinned by the prompts' fingerprint either way, so such a
    folder resumes.
    """
    if old == new:
        return True
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return False
    op, np_ = old.get("prompts"), new.get("prompts")
    if not (isinstance(op, dict) and isinstance(np_, dict)) or "min_sentences" in op:
        return False
    return old == {**new, "prompts": {k: v for k, v in np_.items() if k != "min_sentences"}}


def _read_json(path: Path) -> Any:
    """A JSON file the evaluation wrote, read strictly; ``None`` if missing or unreadable (it is redone)."""
    try:
        return loads_strict(path.read_bytes(), str(path))
    except (OSError, ValueError):
        return None


def prepare_folder(
    out: Path | OwnedFolder, identity: dict[str, Any], force: bool, units: Sequence[str] = ()
) -> OwnedFolder:
    """Claim the report folder, check or write ``config.json`` and list the units (rank 0, under its lock).

    Args:
      out: the folder (or the folder already claimed).
      identity: ``config.json``'s content.
      force: replace an evaluation with other settings (deleting only the files its folder lists).
      units: relative paths of every unit of the evaluation (all ranks), listed before any is written.

    Returns:
      The claimed folder, its temporaries of an interrupted run deleted.

    Raises:
      NotOwnedError: ``out`` is a file, or not empty and not an evaluation (even with ``force``).
      EvaluationError: ``out`` holds an evaluation with other settings, or an unreadable or missing
        ``config.json`` (without ``force``: the units it lists are kept).
    """
    folder = evaluation_folder(out)
    cfg = folder.path / CONFIG
    new = clean_json(identity)
    if folder.owns(CONFIG) and cfg.exists():
        try:
            old = loads_strict(cfg.read_bytes(), str(cfg))
        except (OSError, ValueError) as exc:
            if not force:
                raise EvaluationError(f"{cfg} is unreadable ({exc}); use --force to start again") from None
            old = None
        if not same_settings(old, new):
            if not force:
                diff = _diff(old, new) if isinstance(old, dict) else "(all)"
                raise EvaluationError(
                    f"{folder.path} holds an evaluation with other settings (differ: {diff}); "
                    "use --force to replace it or choose another --out"
                )
            folder.clear()
    elif folder.files:  # files of an evaluation whose config.json is gone: not reusable, but not ours to drop
        if not force:
            raise EvaluationError(
                f"{folder.path}: config.json of this evaluation is missing; pass --force to start again"
            )
        folder.clear()
    folder.remove_debris()
    if not (folder.owns(CONFIG) and cfg.exists()):
        folder.write(CONFIG, _dumps(identity))
    folder.register(units)
    return folder


@contextlib.contextmanager
def _lock(out: Path, rank: int) -> Iterator[None]:
    """Hold ``out/.lock-RANK`` (:func:`pmark_theory.infra.lock.take_lock`: no link followed, a foreign file refused)."""
    path = out / f".lock-{rank}"
    try:
        fd = take_lock(path, f"another evaluation is running on {out} (lock {path.name}, pid " + "{pid})")
    except ForeignLockError:
        raise
    except OutputInUseError as exc:
        raise EvaluationError(str(exc)) from None
    try:
        yield
    finally:
        os.close(fd)


def _units_of(folder: OwnedFolder, ctx: EvalContext, documents: Sequence[Any]) -> dict[str, list[dict]]:
    units: dict[str, list[dict]] = {}
    for run in ctx.config.runs:
        recs = []
        for i, doc in enumerate(documents):
            rec = _read_json(folder.path / unit_relpath(run.run_id, i, doc.doc_id))
            if not isinstance(rec, dict):
                raise EvaluationError(f"unit {run.run_id}/{doc.doc_id} is missing or unreadable: run again")
            recs.append(rec)
        units[run.run_id] = recs
    return units


def _groups(world: World, ctx: EvalContext, n_documents: int) -> list[Any]:
    """This rank's groups of document indices (fixed by index: ``batch_texts`` documents each; by default the
    sampler's :func:`~pmark_impl.generation.texts_per_batch`, a function of the model and its device only)."""
    from pmark_impl.generation import texts_per_batch  # pulls in torch: on first use

    if ctx.batch_texts is None and world.distributed:
        raise EvaluationError(
            "batch_texts must be set when several processes evaluate: the default depends on each rank's device "
            "(pmark evaluate agrees on the smallest across ranks)"
        )
    size = (
        ctx.batch_texts
        if ctx.batch_texts is not None
        else texts_per_batch(ctx.sampler, None, ctx.shared_prefix)
    )
    return world.shard_groups(n_documents, max(int(size), 1))


def rank_units(ctx: EvalContext, n_documents: int, world: World | None = None) -> int:
    """The units (run, document) this rank evaluates: what :func:`run_evaluation`'s ``progress`` counts to."""
    world = world or World()
    return len(ctx.config.runs) * sum(len(g) for g in _groups(world, ctx, n_documents))


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
        except (PMarkValueError, OSError) as exc:
            err = exc
    if not agree(world, err is None):
        raise err if err is not None else EvaluationError("rank 0 could not create the report folder")
    runs = ctx.config.runs
    with _lock(out, world.rank):  # held from before the folder is prepared (--force deletes under it)
        folder: OwnedFolder | None = None
        if world.rank == 0:
            every_unit = [unit_relpath(r.run_id, i, d.doc_id) for r in runs for i, d in enumerate(documents)]
            try:
                folder = prepare_folder(out, identity, force, every_unit)
            except (PMarkValueError, OSError) as exc:
                err = exc
        if not agree(world, err is None):
            raise err if err is not None else EvaluationError("rank 0 could not prepare the report folder")
        if folder is None:  # another rank: writes only the units rank 0 listed
            folder = open_folder(out, KIND, ignore=LOCKS, what="--out")
            if not same_settings(_read_json(out / CONFIG), clean_json(identity)):
                raise EvaluationError(
                    f"rank {world.rank}: {out}/config.json differs from this rank's settings"
                )
        lm_run = next((r for r in runs if r.scheme == "none"), None)
        groups = _groups(world, ctx, len(documents))
        total, done = rank_units(ctx, len(documents), world), 0
        failure: BaseException | None = None
        try:
            for run in runs:
                for group in groups:
                    rels = [unit_relpath(run.run_id, i, documents[i].doc_id) for i in group]
                    todo = [not isinstance(_read_json(out / rel), dict) for rel in rels]
                    # the whole group is generated even when resuming part of it: its batches stay the same
                    texts = generate_group(ctx, run, [documents[i] for i in group]) if any(todo) else []
                    for k, i in enumerate(group):
                        doc = documents[i]
                        if todo[k]:
                            lm_text = None
                            if lm_run is not None and run is not lm_run:
                                lm_rec = _read_json(out / unit_relpath(lm_run.run_id, i, doc.doc_id))
                                lm_text = lm_rec.get("text") if isinstance(lm_rec, dict) else None
                            record = run_unit(ctx, run, doc, lm_text, texts[k])
                            folder.write(rels[k], _dumps(record), mode=EVIDENCE_MODE)
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
        units = _units_of(folder, ctx, documents)
        results = aggregate(ctx.config, units, identity)
        timing_doc = timing(ctx.config, units)
        folder.write("results.json", _dumps(results))
        folder.write("timing.json", _dumps(timing_doc))
        lines = [  # wall times are not reproducible: they are in timing.json only
            json.dumps(clean_json({k: v for k, v in u.items() if k != "seconds"}), ensure_ascii=False)
            for run in runs
            for u in units[run.run_id]
        ]
        folder.write("texts.jsonl", ("\n".join(lines) + "\n").encode(), mode=EVIDENCE_MODE)
        _report(folder, results, loads_strict(_dumps(timing_doc), "timing.json"))
        barrier(world)
        return results


def _report(folder: OwnedFolder, results: dict[str, Any], timing_doc: dict[str, Any]) -> None:
    from pmark_impl.evaluate._report import write_report

    write_report(results, folder, timing=timing_doc)
