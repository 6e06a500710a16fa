"""The evaluation folder as a folder the toolkit owns (issue 24): which folders ``pmark evaluate`` writes into.

An evaluation folder is a :class:`pmark_theory.infra.owned.OwnedFolder` of kind :data:`KIND`: its marker
``.pmark-folder.json`` lists every file the evaluation wrote (``config.json``, ``units/RUN/*.json``,
``results.json``, ``timing.json``, ``texts.jsonl``, ``report.md``, ``figures/*.png``, ``tables/*.csv`` and
``tables/*.tex``). ``--force`` deletes only those; a non-empty folder without the marker is refused before
anything is written, with or without ``--force``.
The lock files ``.lock-RANK`` (:data:`LOCKS`) are the runner's and are never listed nor deleted.

Evaluations of the previous version (no marker: ``config.json`` was the only sign) are adopted, and so can be
resumed, only if ``config.json`` is an evaluation's settings (a JSON object with ``runs``, ``prompts``,
``key_fingerprint``, ``model`` and ``encoder``) and every other file is one that version wrote, by name
(:data:`LEGACY_EVALUATION`: the files above with the unit and figure names it used, and their temporaries; that
version wrote no ``tables/``, so a marker-less folder holding one is foreign). Any
other file (``figures/chart.png``, ``notes.txt``, a ``*.tmp`` of another name) makes the folder foreign: it is
refused.
"""

from __future__ import annotations

import os
from pathlib import Path

from pmark_theory.infra.json import loads_strict
from pmark_theory.infra.owned import LegacyLayout, OwnedFolder, claim_folder, probe_folder

__all__ = ["KIND", "LEGACY_EVALUATION", "LOCKS", "check_ours", "evaluation_folder"]

#: The kind of an evaluation folder.
KIND = "pmark evaluation"
#: The per-rank lock files of the runner (glob patterns of ``ignore``).
LOCKS = (".lock-*",)
_IDENTITY = ("runs", "prompts", "key_fingerprint", "model", "encoder")


def _old_config(data: bytes) -> bool:
    doc = loads_strict(data, "config.json")
    return isinstance(doc, dict) and all(k in doc for k in _IDENTITY) and isinstance(doc["runs"], list)


#: What ``pmark evaluate`` wrote before evaluation folders had a marker.
LEGACY_EVALUATION = LegacyLayout(
    sentinel="config.json",
    files=(
        r"config\.json",
        r"results\.json",
        r"timing\.json",
        r"texts\.jsonl",
        r"report\.md",
        r"units/[A-Za-z0-9._-]+/\d{5}-[0-9a-f]{8}\.json",
        r"figures/(roc|tpr-vs-rate|grid)-[A-Za-z0-9._-]+\.png",
        r"figures/(cost|quality-vs-tpr)\.png",
    ),
    dirs=(r"units/", r"units/[A-Za-z0-9._-]+/", r"figures/"),
    accepts=_old_config,
    description="an evaluation of an earlier pmark version",
)


def check_ours(out: str | os.PathLike[str]) -> str:
    """Refuse ``out`` unless an evaluation may be written there; reads only (call it before any model loads).

    Returns:
      The folder's state: ``"absent"``, ``"empty"``, ``"owned"`` or ``"legacy"``.

    Raises:
      NotOwnedError: ``out`` is a file, a non-empty folder that is not an evaluation, or another kind of pmark
        folder (``--force`` never changes that; the message does not suggest it).
    """
    return probe_folder(out, KIND, ignore=LOCKS, legacy=LEGACY_EVALUATION, what="--out")


def evaluation_folder(out: str | os.PathLike[str] | OwnedFolder) -> OwnedFolder:
    """``out`` itself, or the evaluation folder at that path (created, adopted or re-opened; see the module).

    Call it while holding the folder's lock ``.lock-0`` when other runs may use the folder.

    Raises:
      NotOwnedError: see :func:`check_ours`.
    """
    if isinstance(out, OwnedFolder):
        return out
    return claim_folder(
        Path(out), KIND, tool="pmark evaluate", ignore=LOCKS, legacy=LEGACY_EVALUATION, what="--out"
    )
