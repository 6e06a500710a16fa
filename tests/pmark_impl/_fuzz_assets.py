"""Fake models and the valid files the fuzz suite starts from (``test_fuzz_standing.py``, issue 24).

:func:`install_fakes` replaces every model loader: the CLI's ``pmark_impl.cli.models.load_encoder`` /
``load_sampler`` by the fakes of :mod:`_impl_fakes` (as ``test_cli_fuzz.py`` does; any encoder name gives the
32-dimensional fake except :data:`DIM16`), ``pmark_impl.sampling._models.load_lm`` by a refusal, so ``demo``, the paraphrase attacks and a perplexity
oracle never load a real model. :func:`build_assets` makes, once per run and through ``pmark`` itself, the valid
files the variants start from (keys of every kind, generated texts with their provenance records, a SimMark
calibration, an evaluation folder, a claim-check report); it also warms every code path up.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _impl_fakes import FakeEncoder, FakeSampler, universe

SENTENCES = universe(200)
#: The 16-dimensional encoder name: a key of dimension 32 does not fit it.
DIM16 = "dim16-encoder"
#: A path that can never be written (procfs refuses new files, even to root).
PROC_PATH = "/proc/pmark-fuzz-no-such-dir/out"


def install_fakes(mp: Any) -> None:
    """Fake models everywhere, through ``mp`` (a ``pytest.MonkeyPatch``)."""
    from pmark_impl.cli import models
    from pmark_impl.sampling import _models

    encoders = {
        32: FakeEncoder.random(SENTENCES, 32, seed=3),
        16: FakeEncoder.random(SENTENCES, 16, seed=4, name=DIM16),
    }

    def load_encoder(name: Any = None, **_: Any) -> FakeEncoder:
        return encoders[16 if name == DIM16 else 32]

    def load_sampler(model: Any, temperature: Any, top_p: Any, **_: Any) -> FakeSampler:
        from pmark_impl.sampling import SamplingConfig

        settings = (("temperature", temperature), ("top_p", top_p))
        SamplingConfig(**{k: v for k, v in settings if v is not None})  # the real loader checks these first
        return FakeSampler(SENTENCES)

    def no_lm(*_: Any, **__: Any) -> Any:
        raise OSError("real language models are disabled in the fuzz suite")

    mp.setattr(models, "load_encoder", load_encoder)
    mp.setattr(models, "load_sampler", load_sampler)
    mp.setattr(_models, "load_lm", no_lm)
    mp.setattr(_models, "load_default_lm", no_lm)
    mp.setattr(_models, "load_encoder", load_encoder)
    mp.setattr(_models, "load_default_encoder", load_encoder)


# --------------------------------------------------------------------------------------------------------------
# Valid files, made once.
# --------------------------------------------------------------------------------------------------------------
def document(i: int, n: int = 10) -> str:
    """The ``i``-th document of ``n`` distinct sentences of the fake universe."""
    return " ".join(SENTENCES[(i * n + j) % len(SENTENCES)] for j in range(n))


CORPUS = ("\n\n".join(document(i, 12) for i in range(12)) + "\n").encode()
CORPUS_JSONL = ("\n".join(json.dumps({"text": document(i, 12)}) for i in range(12)) + "\n").encode()
PROMPTS = ("\n".join(document(i, 5) for i in range(6)) + "\n").encode()
TEXT = (" ".join(SENTENCES[:6]) + "\n").encode()
MODES = ("offline", "online", "semstamp", "ksemstamp", "simmark")


@dataclasses.dataclass(frozen=True)
class Assets:
    """Bytes of the valid files (``trees``: a folder as ``{relative path: bytes}``)."""

    keys: dict[str, bytes]
    texts: dict[str, tuple[bytes, bytes]]  # mode -> (text, provenance record)
    simmark: bytes
    evaluation: dict[str, bytes]
    report: dict[str, bytes]


def build_assets(main: Callable[[list[str]], int], scratch: Path) -> Assets:
    """Run ``pmark`` (with the fakes installed) to make the valid files, and warm the code paths up (JAX compiles
    each detection and generation path once; later cases then run in milliseconds)."""
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "corpus.txt").write_bytes(CORPUS)
    (scratch / "prompts.txt").write_bytes(PROMPTS)
    made = [
        "keygen --out k.key --encoder fake-encoder --dim 32",
        "keygen --out ctx.key --encoder fake-encoder --dim 32 --seeding context",
        "keygen --out cent.key --encoder fake-encoder --centroid-corpus corpus.txt --n-clusters 2",
        "calibrate k.key --out cal.key --corpus corpus.txt --accept-high-fpr --report calreport",
        "calibrate-simmark --out sm.json --corpus corpus.txt",
        *(f"generate --key k.key --mode {m} --max-sentences 3 --n 16 --out {m}.txt P." for m in MODES),
        "evaluate --prompts prompts.txt --limit 1 --schemes offline --max-sentences 2 --n 4 --attack none "
        "--oracle none --min-sentences 2 --quiet --out ev",
        "check --only C4 --quick --budget 0.01 --no-progress --out rep",
    ]
    warm = [
        *(f"detect --key k.key {m}.txt" for m in MODES if m != "simmark"),
        "detect --key k.key --test soft offline.txt",
        "detect --key cal.key --no-provenance offline.txt",
        "detect --key k.key --simmark-calibration sm.json simmark.txt",
        *(
            f"generate --key ctx.key --mode {m} --max-sentences 3 --n 16 --out ctx-{m}.txt P."
            for m in MODES[:2]
        ),
        "detect --key ctx.key ctx-offline.txt",
        "generate --key cent.key --mode ksemstamp --gamma 0.5 --max-sentences 3 --n 4 P.",
        "generate --key k.key --max-sentences 12 P.",
        "attack word-substitute offline.txt",
        "validate-proxy --synthetic 50 8 --trials 64 --attack 16 --candidates 4 --T 2 --etas 0.1 --out vp -- "
        "builtin:pmark",
    ]
    cwd = os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    try:
        os.chdir(scratch)
        for i, line in enumerate(made + warm):
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                status = main(line.split())
            assert status == 0 or i >= len(made), (line, err.getvalue()[-2000:])
    finally:
        os.chdir(cwd)

    def tree(name: str) -> dict[str, bytes]:
        root = scratch / name
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

    return Assets(
        keys={k: (scratch / f"{k}.key").read_bytes() for k in ("k", "ctx", "cent", "cal")},
        texts={
            m: ((scratch / f"{m}.txt").read_bytes(), (scratch / f"{m}.txt.pmark.json").read_bytes())
            for m in MODES
        },
        simmark=(scratch / "sm.json").read_bytes(),
        evaluation=tree("ev"),
        report=tree("rep"),
    )
