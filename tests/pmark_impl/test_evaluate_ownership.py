"""``pmark evaluate --out DIR --force`` removes only what the toolkit wrote (issue 24).

The destructive case of the issue, reproduced exactly: a user's folder holding ``config.json``, ``report.md``,
``figures/chart.png`` and a nested ``x.tmp``; ``pmark evaluate ... --out DIR --force`` used to take any folder
with a ``config.json`` for an evaluation, delete ``figures/`` and ``units/`` whole and replace ``config.json`` and
``report.md``. Now it is refused with one line and exit status 2 before any model loads and before any write,
every file byte-identical. In a real evaluation folder ``--force`` deletes only the files its manifest lists, and
the stale temporaries of an interrupted evaluation are cleaned like ``pmark check``'s (only ours).

Models: the tiny LM and bag-of-words encoder of ``test_evaluate.py``; one document, the offline scheme, two
sentences, no attack (a run takes a few seconds).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from pmark_impl import cli
from pmark_impl.cli import models
from pmark_theory.infra.owned import MARKER_NAME
from tests.pmark_impl.test_evaluate import SMALL, install_test_models
from tests.pmark_impl.test_power_real import RICH_CORPUS

UNIT = "units/offline-N64-b4/00000-0a913daa.json"  # the one unit of SMALL on the prompt file below


def snapshot(root: Path) -> dict[str, object]:
    """``relpath -> bytes`` (files) or ``"<dir>"`` of everything under ``root``."""
    out: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            out[p.relative_to(root).as_posix()] = "<dir>" if p.is_dir() else p.read_bytes()
    return out


@pytest.fixture(scope="module")
def prompts(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("prompts") / "prompts.jsonl"
    path.write_text(json.dumps({"id": "doc-00", "text": " ".join(RICH_CORPUS[:6])}) + "\n")
    return path


@pytest.fixture
def loads(monkeypatch) -> list[str]:
    """The test models, counting every load (a refusal must come before any)."""
    install_test_models(cli, monkeypatch.setattr)
    calls: list[str] = []
    enc, lm = models.load_encoder, models.load_sampler
    monkeypatch.setattr(models, "load_encoder", lambda *a, **k: calls.append("encoder") or enc(*a, **k))
    monkeypatch.setattr(models, "load_sampler", lambda *a, **k: calls.append("lm") or lm(*a, **k))
    return calls


def evaluate(capsys, out: Path, prompts: Path, *extra: str) -> tuple[int, str]:
    capsys.readouterr()
    code = cli.main(["evaluate", "--prompts", str(prompts), "--out", str(out), "--quiet", *SMALL, *extra])
    return code, capsys.readouterr().err


def user_folder(root: Path, config: str) -> Path:
    """The issue's folder: config.json, report.md, figures/chart.png, a nested x.tmp (and hidden temporaries)."""
    (root / "figures").mkdir(parents=True)
    (root / "nested").mkdir()
    (root / "config.json").write_text(config)
    (root / "report.md").write_text("# My report\n")
    (root / "figures" / "chart.png").write_bytes(b"\x89PNG\r\n\x1a\nmy chart")
    (root / "nested" / "x.tmp").write_text("draft")
    (root / "nested" / ".x.abcdefgh.tmp").write_text("hidden draft")
    return root


#: A config.json as an evaluation writes it (the previous version's only sign): still not enough to adopt the
#: folder while figures/chart.png and nested/ are there.
EVALUATION_LIKE = json.dumps(
    {"runs": [], "prompts": {}, "key_fingerprint": "x", "model": "m", "encoder": "e"}
)


@pytest.mark.parametrize("config", ['{"experiment": "mine"}\n', EVALUATION_LIKE])
@pytest.mark.parametrize("force", [True, False])
def test_evaluate_refuses_a_user_folder_before_any_model_or_write(
    tmp_path, capsys, prompts, loads, config, force
):
    out = user_folder(tmp_path / "mine", config)
    before = snapshot(out)
    code, err = evaluate(capsys, out, prompts, *(["--force"] if force else []))
    assert code == 2
    assert err.count("\n") == 1 and err.startswith(f"pmark: error: --out {out} is not empty"), err
    assert "is not a pmark evaluation" in err and "choose another --out" in err and "--force" not in err
    assert loads == []  # refused before any model loaded
    assert snapshot(out) == before  # byte-identical; nothing added (no lock file, no marker)


def test_force_deletes_only_what_the_evaluation_listed(tmp_path, capsys, prompts, loads):
    out = tmp_path / "eval"
    assert evaluate(capsys, out, prompts)[0] == 0
    first = (out / "results.json").read_bytes()
    user = {
        "notes.txt": b"my notes",
        "figures/chart.png": b"my chart",
        "units/mine.json": b'{"mine": true}',
        "units/offline-N64-b4/extra.json": b"{}",
    }
    for rel, data in user.items():
        (out / rel).write_bytes(data)
    code, err = evaluate(capsys, out, prompts, "--seed", "9")
    assert code == 2 and "other settings" in err and "--force" in err  # ours: --force applies, and is said
    assert evaluate(capsys, out, prompts, "--seed", "9", "--force")[0] == 0
    after = snapshot(out)
    assert {rel: after.get(rel) for rel in user} == user  # the user's files survive, byte-identical
    assert after["results.json"] != first and json.loads(after["config.json"])["seed"] == 9
    listed = json.loads(after[MARKER_NAME])["files"]
    assert not set(user) & set(listed) and {"config.json", UNIT, "report.md", "texts.jsonl"} <= set(listed)


def test_stale_temporaries_of_an_interrupted_evaluation_are_cleaned_and_only_ours(
    tmp_path, capsys, prompts, loads
):
    out = tmp_path / "eval"
    assert evaluate(capsys, out, prompts)[0] == 0
    ours = [  # what an evaluation killed mid-write (SIGKILL) leaves
        ".results.json.abcdefgh.tmp",
        ".config.json.x1y2z3_4.tmp",
        "units/offline-N64-b4/.00000-0a913daa.json.0000abcd.tmp",
        "figures/.cost.png.zzzzzzzz.tmp",
    ]
    for rel in ours:
        (out / rel).write_text("half")
    (out / "nested").mkdir()
    theirs = {
        "nested/x.tmp": b"draft",
        "nested/.results.json.abcdefgh.tmp": b"same form, in a folder pmark did not create",
        ".notes.txt.abcdefgh.tmp": b"same form, a name pmark did not write",
        "units/.mine.json.abcdefgh.tmp": b"same form, in pmark's folder, a name it did not write",
        "x.tmp": b"draft",
    }
    for rel, data in theirs.items():
        (out / rel).write_bytes(data)
    results = (out / "results.json").read_bytes()
    assert evaluate(capsys, out, prompts)[0] == 0  # resume: nothing to recompute
    after = snapshot(out)
    assert not [rel for rel in ours if rel in after]
    assert {rel: after.get(rel) for rel in theirs} == theirs
    assert after["results.json"] == results


def test_an_evaluation_of_the_previous_version_resumes_only_when_it_holds_nothing_else(
    tmp_path, capsys, prompts, loads
):
    out = tmp_path / "eval"
    assert evaluate(capsys, out, prompts)[0] == 0
    results = (out / "results.json").read_bytes()
    listed = json.loads((out / MARKER_NAME).read_text())["files"]
    (out / MARKER_NAME).unlink()  # now laid out as the previous version left it (it wrote no tables/)
    shutil.rmtree(out / "tables")
    (out / f"units/offline-N64-b4/.{Path(UNIT).name}.abcdefgh.tmp").write_text("half")
    assert evaluate(capsys, out, prompts)[0] == 0  # adopted, and resumed
    assert (out / "results.json").read_bytes() == results
    assert json.loads((out / MARKER_NAME).read_text())["files"] == listed
    assert not list((out / "units").rglob("*.tmp"))

    (out / MARKER_NAME).unlink()
    shutil.rmtree(out / "tables")
    (out / "figures" / "chart.png").write_bytes(b"my chart")
    before = snapshot(out)
    code, err = evaluate(capsys, out, prompts, "--seed", "9", "--force")
    assert code == 2 and "figures/chart.png is not a file pmark wrote" in err and "--force" not in err
    assert snapshot(out) == before
