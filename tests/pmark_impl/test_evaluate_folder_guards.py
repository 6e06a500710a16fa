"""An evaluation folder's hours of work are never dropped by a plain rerun, nor its lock file by a user's (#24).

``prepare_folder`` used to clear every listed unit when ``config.json`` was listed but missing, even without
``--force``; the per-rank lock ``.lock-RANK`` was opened following links and truncated whatever it was.
"""

from __future__ import annotations

import json

import pytest

from pmark_impl.evaluate import EvaluationError
from pmark_impl.evaluate._runner import _lock, prepare_folder
from pmark_theory._validate import PMarkValueError
from pmark_theory.infra.lock import ForeignLockError
from pmark_theory.infra.owned import MARKER_NAME

IDENTITY = {"runs": [{"run_id": "r"}], "prompts": "p", "key_fingerprint": "k", "model": "m", "encoder": "e"}
UNITS = ["units/r/00000-0a913daa.json", "units/r/00001-0b913daa.json"]


def test_a_missing_config_is_refused_without_force_and_keeps_every_unit(tmp_path):
    out = tmp_path / "eval"
    folder = prepare_folder(out, IDENTITY, False, UNITS)
    for rel in UNITS:
        folder.write(rel, b'{"unit": "hours of work"}\n')
    (out / "config.json").unlink()
    with pytest.raises(EvaluationError) as info:
        prepare_folder(out, IDENTITY, False, UNITS)
    assert isinstance(info.value, PMarkValueError)  # one line, exit status 2
    assert str(info.value) == f"{out}: config.json of this evaluation is missing; pass --force to start again"
    assert all((out / rel).read_bytes() == b'{"unit": "hours of work"}\n' for rel in UNITS)
    assert set(UNITS) <= set(json.loads((out / MARKER_NAME).read_text())["files"])

    prepare_folder(out, IDENTITY, True, UNITS)  # --force: starts again
    assert not any((out / rel).exists() for rel in UNITS)
    assert json.loads((out / "config.json").read_text())["model"] == "m"


def test_the_rank_lock_is_never_a_link_nor_a_users_file(tmp_path):
    out, target = tmp_path / "eval", tmp_path / "precious.txt"
    out.mkdir()
    target.write_bytes(b"years of notes\n")
    (out / ".lock-0").symlink_to(target)
    with pytest.raises(ForeignLockError, match="symbolic link"), _lock(out, 0):
        pass
    assert target.read_bytes() == b"years of notes\n"
    (out / ".lock-1").write_bytes(b"my notes\n")
    with pytest.raises(ForeignLockError, match="something other than a process id"), _lock(out, 1):
        pass
    assert (out / ".lock-1").read_bytes() == b"my notes\n"
    with _lock(out, 2):  # a new lock of pmark: its pid
        assert (out / ".lock-2").read_text().strip().isdigit()
    with _lock(out, 2):  # and taken again (the process died: the file stays, only a handle)
        pass
