"""Which existing file ``--force`` may replace: only an output the toolkit wrote and recognises as its own.

``--force`` lets a command replace its earlier output; it must never replace a file the user wrote (issue 36:
``echo mine > o.txt.pmark.json; pmark generate … --out o.txt --force`` replaced the user's file, and ``pmark
attack … --out k.key --force`` turned a secret key into a text of mode 0644). Every output of a command is
therefore of one *kind*, and an existing file at its path is replaced only when it is recognisably an output
of that kind (:func:`check_replaceable`):

* ``"key"``: a JSON object whose ``format`` is ``"pmark-key"`` — a secret key is replaced only by another key
  (``pmark keygen`` / ``pmark calibrate`` with ``--force``), never by a text, a record or a calibration;
* ``"record"``: a JSON object whose ``format`` is ``"pmark-provenance"`` (a provenance record);
* ``"simmark-calibration"``: a JSON object whose ``format`` is ``"pmark-simmark-calibration"``;
* ``"text"``: a text whose record ``TEXT.pmark.json`` is a provenance record holding the SHA-256 of the text's
  current bytes (``text_sha256``, written by ``pmark generate --out`` and ``pmark attack --out``). A text the
  user edited since, one written to stdout, or one written without a record (``pmark attack --no-provenance``)
  cannot be told from the user's own file, and is refused: remove it yourself, or choose another name.

Folders (reports, evaluations) follow their own marker and manifest (:mod:`pmark_theory.infra.owned`). The check
runs with the paths' other checks before any model loads, and again just before each write.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
from collections.abc import Mapping
from typing import Any

from pmark_impl.cli.files import CLIError

__all__ = ["KINDS", "check_outputs_replaceable", "check_replaceable", "write_text_and_record"]

#: The kinds of single-file output and the ``format`` field that marks the JSON ones.
KINDS: dict[str, str | None] = {
    "text": None,
    "record": "pmark-provenance",
    "key": "pmark-key",
    "simmark-calibration": "pmark-simmark-calibration",
}
#: The largest JSON output read to recognise it (the largest the toolkit writes: a 16 MiB text's record).
_JSON_LIMIT = 32 << 20


def _json_format(path: str) -> str | None:
    """The ``format`` field of the JSON object in ``path`` (``None``: not a readable JSON object)."""
    from pmark_impl._user_json import parse_user_json
    from pmark_theory.infra.files import read_bounded

    try:
        raw, _ = read_bounded(path, limit=_JSON_LIMIT)
        doc = parse_user_json(raw.decode("utf-8"), path, ValueError)
    except (ValueError, OSError):
        return None
    fmt = doc.get("format") if isinstance(doc, dict) else None
    return fmt if isinstance(fmt, str) else None


def _text_is_ours(path: str) -> bool:
    """``path``'s record ``PATH.pmark.json`` holds the SHA-256 of ``path``'s current bytes."""
    from pmark_impl.generation import load_provenance, provenance_path
    from pmark_theory.infra.files import TEXT_LIMIT_BYTES, read_bounded

    record = provenance_path(path)
    if not os.path.isfile(record):
        return False
    try:
        digest = load_provenance(record).text_sha256
        raw, _ = read_bounded(path, limit=TEXT_LIMIT_BYTES)
    except (ValueError, OSError):
        return False
    return digest is not None and hashlib.sha256(raw).hexdigest() == digest


def _describe(path: str) -> str:
    fmt = _json_format(path)
    if fmt == KINDS["key"]:
        return "a secret key"
    if fmt is not None and fmt in KINDS.values():
        return f"a {fmt.removeprefix('pmark-').replace('-', ' ')} of pmark's"
    return "a file pmark did not write"


def check_replaceable(path: str | None, kind: str, role: str, force: bool) -> None:
    """Refuse to replace ``path`` unless it is absent or, with ``force``, recognisably an output of ``kind``.

    Args:
      path: the output (``None`` or ``"-"``: stdout, nothing to check).
      kind: one of :data:`KINDS`.
      role: the output's role in messages (``"--out"``, ``"provenance file"``).
      force: the command's ``--force``; without it an existing file is refused by the paths' own checks.

    Raises:
      CLIError: ``path`` exists, ``force`` is given, and it is not an output of ``kind`` (module docstring).
    """
    if kind not in KINDS:
        raise ValueError(f"unknown output kind {kind!r}")  # a bug of the caller, not of the user
    if path is None or path == "-" or not force or not os.path.isfile(path) or os.path.islink(path):
        return  # absent, or refused by check_paths (not a regular file, exists without --force)
    fmt = KINDS[kind]
    if fmt is not None and _json_format(path) == fmt:
        return
    if fmt is None and _text_is_ours(path):
        return
    if kind == "text":
        rule = (
            f"--force replaces a text only when its record {path}.pmark.json holds the text's digest (a text "
            "pmark wrote and nobody edited since)"
        )
    else:
        rule = f'--force replaces only a {kind.replace("-", " ")} file of pmark\'s ("format": "{fmt}")'
    raise CLIError(
        f"{role} {path} exists and is {_describe(path)}: {rule}; remove it yourself or choose another file"
    )


def check_outputs_replaceable(outputs: Mapping[str, tuple[str | None, str]], force: bool) -> None:
    """:func:`check_replaceable` for each ``role -> (path, kind)``."""
    for role, (path, kind) in outputs.items():
        check_replaceable(path, kind, role, force)


def write_text_and_record(
    text: str, out: str | None, record: Any | None, record_path: str | None, force: bool
) -> None:
    """Write ``text`` to ``out`` (``None``: stdout) and its provenance ``record`` to ``record_path``, or neither.

    The record names the text by its SHA-256 (so that a later ``--force`` recognises the text) and is checked
    by the reader's rules before anything is written; both targets are checked again (:func:`check_replaceable`)
    just before the writes. If the record cannot be written after the text was, the new text is removed: a text
    is never left beside no record, or beside another text's.

    Raises:
      CLIError: a target is not replaceable, or a write failed (nothing of this call is left).
      ProvenanceError: the record breaks the schema (nothing written).
    """
    from pmark_impl.cli.files import output_errors
    from pmark_impl.generation import provenance_bytes
    from pmark_theory.infra.files import write_atomic

    data = text.encode("utf-8")
    raw = None
    if record is not None and record_path is not None:
        raw = provenance_bytes(record.for_text(data) if out is not None else record, record_path)
    check_replaceable(out, "text", "--out", force)
    check_replaceable(record_path, "record", "provenance file", force)
    if out is None:
        sys.stdout.write(text)
    else:
        with output_errors(out):
            write_atomic(out, data, force=force, what="output file")
    if raw is None:
        return
    try:
        with output_errors(record_path, "provenance file"):
            write_atomic(record_path, raw, force=force, mode=0o600, what="provenance file")
    except CLIError:
        if out is not None:
            with contextlib.suppress(OSError):
                os.remove(out)
        raise
