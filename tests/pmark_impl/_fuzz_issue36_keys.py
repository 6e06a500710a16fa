"""Issue 36's key-file and ``generate_many`` cases for the standing fuzz suite (``test_fuzz_standing.py``).

Key fields validated by meaning: a hand-edited key whose calibration could not have come from the computation
that wrote it (a centre outside the unit ball — ``5.0`` in every coordinate made ``detect --test per_key`` answer
``p ~ 0.99`` for any text —, ``text_sentences`` of ``10**12``, a band edge beyond the largest proxy, cell counts
no corpus gives, a text-level null with fewer texts than fitting keeps or more texts at a longer length) must be
refused by every command and by ``load_key``, with one line naming the field. ``generate_many`` checks its own
arguments (``seeds`` as a set or a dict, ``seeds=np.int64(3)``, ``max_rows=0``, ``refill='no'``,
``speculate='yes'``, ``batch_texts=10**9``) before any work, also when the sampler does not batch.

:func:`keys_cli_cases` and :func:`keys_api_cases` return the cases; each fails on the code the issue was filed
against (commit e03a448: the command exits 0, the call returns or raises a raw ``TypeError``) and passes since.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import numpy as np
from _fuzz_api_impl import TEXT, api_encoders, api_keys
from _fuzz_assets import CORPUS, SENTENCES, Assets
from _fuzz_harness import ApiCase, CliCase, FileSpec, short_repr
from _impl_fakes import FakeSampler

#: A cell calibration of SemStamp with ``lsh_dim = 2`` (4 cells) that a corpus can give: 18 sentences in 10 texts of
#: at most 2 sentences, 12 transitions (8..17 allowed: 6 documents).
GOOD_CELLS = {
    "scheme": "semstamp",
    "size_option": "lsh_dim",
    "size": 2,
    "n_cells": 4,
    "cell_map_digest": "0123456789abcdef",
    "smoothing": "jeffreys-pooled",
    "text_sentences": 2,
    "corpus": "hand-made",
    "corpus_fingerprint": "0123456789abcdef",
    "position_counts": [[3, 2, 1, 4], [2, 2, 3, 1]],
    "transition_counts": [[1, 1, 1, 0], [0, 1, 1, 1], [1, 1, 0, 0], [1, 0, 1, 2]],
}
#: A text-level null a key can hold: 20 texts of 2 sentences, 19 of 3.
GOOD_NULL = {
    "scheme": "offline",
    "test": "per_key",
    "signature": "0123456789abcdef",
    "corpus": "hand-made",
    "corpus_fingerprint": "0123456789abcdef",
    "confidence": 0.9,
    "cut": "disjoint-windows",
    "lengths": {"2": {"p": [0.25, 0.75], "n": [10, 10]}, "3": {"p": [0.5], "n": [19]}},
}


def _unit(d: int, scale: float) -> list[float]:
    v = np.random.default_rng(36).standard_normal(d)
    return [float(x) for x in scale * v / np.linalg.norm(v)]


def bad_key_docs(key_doc: dict, cal_doc: dict) -> dict[str, dict]:
    """``tag -> key document`` of every hand edit issue 36 refuses, from a plain key's and a calibrated key's
    documents (``cal_doc`` must hold a ``calibration`` with ``magnitude_bands``)."""
    d = len(cal_doc["calibration"]["centre"])

    def cal(**changes: Any) -> dict:
        return {**cal_doc, "calibration": {**cal_doc["calibration"], **changes}}

    def extra(**fields: Any) -> dict:
        return {**key_doc, "version": 2, **fields}

    bands = cal_doc["calibration"]["magnitude_bands"]
    return {
        "centre 5.0 in every coordinate": cal(centre=[5.0] * d),
        "centre +-1e308": cal(centre=[1e308 * (-1) ** i for i in range(d)]),
        "centre 1e300 in every coordinate": cal(centre=[1e300] * d),
        "centre of norm 1.01": cal(centre=_unit(d, 1.01)),
        "text_sentences 10**12": cal(text_sentences=10**12),
        "a band edge of 5.0": cal(magnitude_bands={**bands, "edges": [*bands["edges"][:-1], 5.0]}),
        "lsh_dim 2 with 16 cells": extra(
            cell_calibrations=[
                {**GOOD_CELLS, "n_cells": 16, "position_counts": [[1] * 16] * 2,
                 "transition_counts": [[0] * 16] * 15 + [[1] * 16]}
            ]
        ),
        "lsh_dim 40": extra(cell_calibrations=[{**GOOD_CELLS, "size": 40}]),
        "no transitions in 18 sentences of 10 texts": extra(
            cell_calibrations=[{**GOOD_CELLS, "transition_counts": [[0] * 4] * 4}]
        ),
        "a text null of 5 texts": extra(
            text_nulls=[{**GOOD_NULL, "lengths": {"2": {"p": [0.5], "n": [5]}}}]
        ),
        "a text null with more long texts than short": extra(
            text_nulls=[{**GOOD_NULL, "lengths": {"2": {"p": [0.5], "n": [20]}, "3": {"p": [0.5], "n": [40]}}}]
        ),
    }  # fmt: skip


def keys_cli_cases(assets: Assets) -> list[CliCase]:
    """Commands given a hand-edited key (:func:`bad_key_docs` of the fuzz suite's keys): each must exit 2."""
    docs = bad_key_docs(json.loads(assets.keys["k"]), json.loads(assets.keys["cal"]))
    text = FileSpec("in.txt", data=TEXT.encode())
    detect = {
        "centre 5.0 in every coordinate": "detect --key bad.key in.txt --test per_key",
        "centre +-1e308": "detect --key bad.key in.txt --test per_key",
        "centre 1e300 in every coordinate": "detect --key bad.key in.txt --test soft",
        "centre of norm 1.01": "detect --key bad.key in.txt --test per_key",
        "text_sentences 10**12": "detect --key bad.key in.txt",
        "a band edge of 5.0": "detect --key bad.key in.txt --test soft",
    }
    cases = []
    for tag, doc in docs.items():
        line = detect.get(tag, "detect --key bad.key in.txt")
        files = (FileSpec("bad.key", data=json.dumps(doc).encode(), mode=0o600), text)
        cases.append(CliCase("detect", f"issue 36: a key with {tag}", tuple(shlex.split(line)), files,
                             must_refuse=True))  # fmt: skip
    bad = (FileSpec("bad.key", data=json.dumps(docs["centre 5.0 in every coordinate"]).encode(), mode=0o600),)
    cases.append(
        CliCase("generate", "issue 36: generation with a centre of 5.0 in every coordinate",
                ("generate", "--key", "bad.key", "--max-sentences", "2", "--n", "4", "P."), bad, must_refuse=True)
    )  # fmt: skip
    cells = (FileSpec("bad.key", data=json.dumps(docs["lsh_dim 40"]).encode(), mode=0o600),
             FileSpec("corpus.txt", data=CORPUS))  # fmt: skip
    cases.append(
        CliCase("calibrate", "issue 36: calibrate does not carry a key's lsh_dim 40 cell masses into a new key",
                ("calibrate", "bad.key", "--out", "n.key", "--corpus", "corpus.txt", "--accept-high-fpr",
                 "--no-text-null"), cells, outputs=("n.key",), secret_outputs=("n.key",), must_refuse=True)
    )  # fmt: skip
    return cases


def _key_file(doc: dict) -> tuple[FileSpec, ...]:
    return (FileSpec("k.key", data=json.dumps(doc).encode(), mode=0o600),)


def api_key_docs() -> tuple[dict, dict, Any]:
    """A plain and a calibrated key's documents made in memory (the API cases need no assets), and the key."""
    key = api_keys()["key"][0]
    plain = {"format": "pmark-key", "version": 1, "encoder": key.encoder, "dim": key.dim,
             "channels": key.channels, "secret": key.secret.hex()}  # fmt: skip
    edges = [0.0, 0.125, 0.25]
    calibration = {
        "centring": "context", "centre": _unit(key.dim, 0.5), "n_positive": [5] * key.channels, "n_total": 10,
        "text_sentences": 8, "corpus": "hand-made", "corpus_fingerprint": "0123456789abcdef",
        "magnitude_bands": {"edges": edges, "n_positive": [[1, 2, 2]] * key.channels,
                            "n_total": [[2, 4, 4]] * key.channels},
    }  # fmt: skip
    return plain, {**plain, "version": 2, "calibration": calibration}, key


def keys_api_cases() -> list[ApiCase]:
    """``load_key`` of each hand-edited key, ``save_key`` of a key with a centre outside the unit ball, and
    ``generate_many`` with the arguments issue 36 lists."""
    import pmark_impl
    from pmark_impl.keys import load_key, save_key
    from pmark_impl.keys._calibration import calibration_from_json

    plain, calibrated, key = api_key_docs()
    cases = [
        ApiCase("api:load_key", f"load_key('k.key')  # k.key: a key with {tag}", lambda _f: load_key("k.key"),
                files=_key_file(doc), must_raise=True)
        for tag, doc in bad_key_docs(plain, calibrated).items()
    ]  # fmt: skip
    outside = {**calibrated["calibration"], "centre": [5.0] * key.dim}
    cases.append(
        ApiCase("api:save_key", "save_key(key with a centre of 5.0 in every coordinate, 'n.key')",
                lambda f: save_key(key.with_calibration(calibration_from_json(outside, key.dim, key.channels)),
                                   f / "n.key"),
                must_raise=True)
    )  # fmt: skip
    encoder = api_encoders()["encoder"][0]
    prompts = ["P.", "Q."]
    opts = {"mode": "offline", "n_candidates": 4, "max_sentences": 2}

    def many(**kw: Any) -> Any:
        return lambda _f: pmark_impl.generate_many(
            key, FakeSampler(SENTENCES), encoder, prompts, **opts, **kw
        )

    def same_seed(v: Any, _f: Path) -> list[str]:
        alone = pmark_impl.generate(key, FakeSampler(SENTENCES), encoder, prompts[0], seed=3, **opts)
        if [r.seed for r in v] != [3, 3] or v[0].text != alone.text:
            return [f"generate_many(seeds=np.int64(3)) returned {short_repr(v)}"]
        return []

    cases.append(ApiCase("api:generate_many", "generate_many(..., seeds=np.int64(3))", many(seeds=np.int64(3)),
                         same_seed))  # fmt: skip
    refused = {
        "seeds={1, 2}": {"seeds": {1, 2}},
        "seeds={1: 0, 2: 0}  (a dict's keys became seeds)": {"seeds": {1: 0, 2: 0}},
        "max_rows=0": {"max_rows": 0},
        "max_rows=10**9": {"max_rows": 10**9},
        "refill='no'": {"refill": "no"},
        "speculate='yes'": {"speculate": "yes"},
        "batch_texts=10**9": {"batch_texts": 10**9},
    }
    cases += [
        ApiCase("api:generate_many", f"generate_many(key, FakeSampler, encoder, ['P.', 'Q.'], {what})", many(**kw),
                must_raise=True)
        for what, kw in refused.items()
    ]  # fmt: skip
    return cases
