"""Issue 36: a key file's fields are validated by meaning, not only by type (:mod:`pmark_impl.keys._key_meaning`).

A hand-edited key whose calibration no corpus could give — a centre outside the unit ball (``5.0`` in every
coordinate made ``detect --test per_key`` answer ``p ~ 0.99`` for any text), ``text_sentences = 10**12``, a
magnitude band edge beyond the largest proxy, cell counts of another map size or without the transitions of their
sentences, a text-level null with fewer texts than fitting keeps or more texts at a longer length — is refused by
``load_key`` (and so by every command) with one line naming the field and the rule; every key ``pmark keygen`` and
``pmark calibrate`` write still loads. The issue's cases (:mod:`_fuzz_issue36_keys`) run here through the fuzz
suite's own oracle (:mod:`_fuzz_harness`), as ``test_fuzz_standing.py`` will run them.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
from _fuzz_assets import CORPUS, Assets, install_fakes
from _fuzz_harness import api_violations, run_api_call, run_cli_case
from _fuzz_issue36_keys import (
    GOOD_CELLS,
    GOOD_NULL,
    api_key_docs,
    bad_key_docs,
    keys_api_cases,
    keys_cli_cases,
)
from _fuzz_sandbox import CaseRoot

from pmark_impl import cli
from pmark_impl.keys import KeyCalibration, KeyFileError, load_key, save_key

#: What the one-line error of each hand edit names (the field, then the rule).
FIELD_AND_RULE = {
    "centre 5.0 in every coordinate": ("'calibration.centre'", "unit ball"),
    "centre +-1e308": ("'calibration.centre'", "unit ball"),
    "centre 1e300 in every coordinate": ("'calibration.centre'", "unit ball"),
    "centre of norm 1.01": ("'calibration.centre' has norm 1.01", "unit ball"),
    "text_sentences 10**12": ("'calibration.text_sentences'", "at most 10000"),
    "a band edge of 5.0": ("'calibration.magnitude_bands.edges'", "[0, 2]"),
    "lsh_dim 2 with 16 cells": ("'cell_calibrations[0].n_cells'", "2^lsh_dim = 4"),
    "lsh_dim 40": ("'cell_calibrations[0].size'", "lsh_dim must be an integer in 1..16"),
    "no transitions in 18 sentences of 10 texts": ("'cell_calibrations[0].transition_counts'", "allow 8..17"),
    "a text null of 5 texts": ("'text_nulls[0].lengths[2]'", "at least 19"),
    "a text null with more long texts than short": ("'text_nulls[0].lengths[3]'", "no more texts"),
}


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> CaseRoot:
    return CaseRoot(tmp_path_factory.mktemp("fuzz36") / "cases")


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    """The fuzz suite's fakes, and its plain and calibrated keys made by ``pmark keygen`` / ``pmark calibrate``."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("PMARK_DEBUG", raising=False)
        install_fakes(mp)
        scratch = tmp_path_factory.mktemp("assets36")
        (scratch / "corpus.txt").write_bytes(CORPUS)
        cwd = os.getcwd()
        try:
            os.chdir(scratch)
            for line in (
                "keygen --out k.key --encoder fake-encoder --dim 32",
                "calibrate k.key --out cal.key --corpus corpus.txt --accept-high-fpr",
            ):
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    assert cli.main(line.split()) == 0, line
        finally:
            os.chdir(cwd)
        keys = {k: (scratch / f"{k}.key").read_bytes() for k in ("k", "cal")}
        yield Assets(keys=keys, texts={}, simmark=b"", evaluation={}, report={})


def _write(tmp_path: Path, doc: dict, name: str = "k.key") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    path.chmod(0o600)
    return path


def test_keys_the_toolkit_writes_still_load(assets, tmp_path):
    cal = load_key(_write(tmp_path, json.loads(assets.keys["cal"])))
    assert cal.calibration is not None and cal.calibration.has_bands
    assert np.linalg.norm(cal.calibration.centre) <= 1.0  # the mean of the fake encoder's unit embeddings
    assert load_key(_write(tmp_path, json.loads(assets.keys["k"]), "plain.key")).calibration is None


def test_the_issue_cli_cases_are_refused_by_every_command(assets, root):
    cases = keys_cli_cases(assets)
    assert len(cases) == len(FIELD_AND_RULE) + 2
    with pytest.MonkeyPatch.context() as mp:
        install_fakes(mp)
        broken = {c.command() + f"  # {c.tag}": run_cli_case(root, c, cli.main) for c in cases}
    broken = {k: v for k, v in broken.items() if v}
    assert not broken, f"{len(broken)} of {len(cases)} cases broke a rule:\n" + "\n".join(
        f"{k}\n    {v}" for k, v in broken.items()
    )


@pytest.mark.parametrize("case", keys_api_cases(), ids=lambda c: c.describe[:80])
def test_the_issue_api_cases(case, root):
    problems = run_api_call(
        root,
        case.group,
        case.files,
        case.call,
        lambda outcome, folder: api_violations(case, outcome, folder),
        replaceable=case.replaceable,
        budget_s=case.budget_s,
    )
    assert not problems, problems


@pytest.mark.parametrize("tag", sorted(FIELD_AND_RULE))
def test_each_hand_edit_is_one_line_naming_the_field_and_the_rule(tag, tmp_path):
    plain, calibrated, key = api_key_docs()
    path = _write(tmp_path, bad_key_docs(plain, calibrated)[tag])
    with pytest.raises(KeyFileError) as info:
        load_key(path)
    message = str(info.value)
    field, rule = FIELD_AND_RULE[tag]
    assert message.startswith(f"key file {path} is invalid: {field}"), message
    assert rule in message and "\n" not in message and key.secret.hex() not in message


def test_the_unit_ball_tolerance_is_the_documented_one(tmp_path):
    from pmark_impl.keys._key_meaning import (
        UNIT_BALL_ATOL,
    )  # here: the runner tests above also run on old code

    _, calibrated, key = api_key_docs()
    centre = np.asarray(calibrated["calibration"]["centre"]) / 0.5  # a unit vector
    for scale, ok in ((1.0, True), (1 + UNIT_BALL_ATOL / 2, True), (1 + 2 * UNIT_BALL_ATOL, False)):
        doc = {**calibrated, "calibration": {**calibrated["calibration"], "centre": list(scale * centre)}}
        if ok:
            assert load_key(_write(tmp_path, doc)).calibration.dim == key.dim
        else:
            with pytest.raises(KeyFileError, match="unit ball"):
                load_key(_write(tmp_path, doc))


def test_a_cell_calibration_and_a_text_null_a_corpus_can_give_load_and_round_trip(tmp_path):
    plain, _, _ = api_key_docs()
    doc = {**plain, "version": 2, "cell_calibrations": [GOOD_CELLS], "text_nulls": [GOOD_NULL]}
    key = load_key(_write(tmp_path, doc))
    assert key.cell_calibration("semstamp", "lsh_dim", 2).n_cells == 4
    assert [len(p) for p in key.text_nulls[0].null.null_p] == [20, 19]
    assert load_key(save_key(key, tmp_path / "again.key")) == key
    # one text per document (T = 1) has no transition at all: still a corpus
    single = {
        **GOOD_CELLS,
        "text_sentences": 1,
        "position_counts": [[1, 2, 3, 4]],
        "transition_counts": [[0] * 4] * 4,
    }
    assert load_key(_write(tmp_path, {**doc, "cell_calibrations": [single]}, "t1.key")).cell_calibrations


def test_a_key_made_in_memory_with_any_centre_is_not_written(tmp_path):
    _, _, key = api_key_docs()
    far = KeyCalibration("global", np.full(key.dim, 5.0), (1,) * key.channels, 2, 8, "c", "0" * 16)
    experiment = key.with_calibration(far)  # in memory: a research construction, allowed
    with pytest.raises(KeyFileError, match=r"cannot write key file .*'calibration\.centre'.*unit ball"):
        save_key(experiment, tmp_path / "far.key")
    assert not (tmp_path / "far.key").exists()
