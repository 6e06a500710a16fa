"""The README's snippets run as written.

Every ```python block runs in a fresh interpreter in a temporary folder; every ```bash block runs with ``bash -e``
in a temporary folder where ``.venv`` links to the repository's environment, so its ``.venv/bin/...`` commands
run verbatim. A block preceded by ``<!-- readme-test: skip (REASON) -->`` is not run here (it needs the real
SmolLM2 or a long run); :data:`SKIPPED` names the test that covers each such block instead:

- the two commands (``bash run.sh check`` / ``bash run.sh test``): the quick ``pmark check`` block below them runs
  here, and ``bash run.sh test`` is what this suite is;
- the real-model block: its commands run on the tiny LM (:func:`test_real_model_block_on_the_tiny_lm`), and
  verbatim on SmolLM2 (:func:`test_real_model_block_verbatim`).

Budget of the default suite (~60 s on 2 shared cores): the Python blocks, the quick check and the synthetic
``validate-proxy``. Marked slow (they load MiniLM or SmolLM2, a minute or more each): the ``--corpus`` line,
the tiny-LM run of the real-model block and that block verbatim.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests._doc_blocks import ROOT, Block, command_lines, parse_blocks, run_bash, run_python, skip_marker
from tests._doc_blocks import env as _env
from tests._doc_blocks import workdir as _workdir

README = ROOT / "README.md"

_SKIP = skip_marker()


def readme_blocks(text: str | None = None) -> list[Block]:
    """The fenced blocks of the README (or of ``text``), with their skip markers."""
    return parse_blocks(README.read_text(encoding="utf-8") if text is None else text)


BLOCKS = readme_blocks()
#: First line of each skipped block -> the test that runs it (or its equivalent).
SKIPPED = {
    "bash run.sh check     # the main job": "test_bash_line (the quick check below it)",
    ".venv/bin/pmark keygen --out my.key": "test_real_model_block_on_the_tiny_lm / test_real_model_block_verbatim",
    "bash run.sh evaluate": "tests/pmark_impl/test_evaluate.py (the same CLI on the tiny LM, with torchrun)",
}


def _ids(block: Block) -> str:
    return f"line{block.line}"


def test_blocks_and_skip_markers_are_well_formed():
    text = README.read_text(encoding="utf-8")
    assert len(_SKIP.findall(text)) == sum(b.skip is not None for b in BLOCKS)  # no stray marker
    assert {b.lang for b in BLOCKS} <= {"python", "bash"}
    assert sum(b.lang == "python" for b in BLOCKS) >= 2 and sum(b.lang == "bash" for b in BLOCKS) >= 3
    skipped = [b for b in BLOCKS if b.skip is not None]
    assert all(b.skip.strip() for b in skipped)
    assert sorted(next(k for k in SKIPPED if b.first_line.startswith(k)) for b in skipped) == sorted(SKIPPED)


def test_the_two_commands_are_exactly_two():
    text = README.read_text(encoding="utf-8")
    section = re.split(r"\n#{2,3} ", text.split("## The two commands", 1)[1])[0]
    [block] = readme_blocks(section)
    commands = [ln.split("#")[0].strip() for ln in block.code.splitlines() if ln.strip()]
    assert commands == ["bash run.sh check", "bash run.sh test"]


def test_readme_points_inside_the_repository():
    text = README.read_text(encoding="utf-8")
    assert "docs/claims.md" in text and "docs/architecture.md" in text
    assert (
        "PMark: Towards Robust and Distortion-free Semantic-level Watermarking with Channel Constraints"
        in text
    )
    assert "https://github.com/PMark-repo/PMark" in text
    for target in re.findall(r"\]\(([^)#]+)\)", text):
        if "://" not in target:
            assert (ROOT / target).exists(), f"README links to missing {target}"


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang == "python" and b.skip is None], ids=_ids)
def test_python_block(block, tmp_path):
    proc = run_python(block.code, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]


#: Files a bash block needs that the reader supplies (the README says what they hold).
_PROXY_MODULE = """
    import numpy as np

    from pmark_theory import haar_pivots

    PIVOTS = haar_pivots(0, 384, 4)  # all-MiniLM-L6-v2 is 384-d


    def my_proxy(embeddings):
        return embeddings @ PIVOTS.T
"""


def _reader_files(workdir: Path) -> None:
    (workdir / "mypkg").mkdir()
    (workdir / "mypkg" / "__init__.py").write_text("")
    (workdir / "mypkg" / "mod.py").write_text(textwrap.dedent(_PROXY_MODULE))
    subjects = ["The cat", "A dog", "My neighbour", "The old sailor", "A small child", "The teacher"]
    verbs = ["walked to", "looked at", "painted", "talked about", "forgot", "dreamed of"]
    objects = ["the river", "a red house", "the market", "an old book", "the mountains", "a quiet garden"]
    ends = [".", " yesterday.", " every morning."]
    lines = [f"{s} {v} {o}{e}" for s in subjects for v in verbs for o in objects for e in ends][::2]
    (workdir / "sentences.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


#: Command lines of the runnable bash blocks that load the MiniLM encoder (~1 min on 2 shared cores): slow.
_SLOW_LINE = re.compile(r"--corpus")


def _bash_lines() -> list:
    out = []
    for block in BLOCKS:
        if block.lang != "bash" or block.skip is not None:
            continue
        for number, line in command_lines(block):
            marks = [pytest.mark.slow] if _SLOW_LINE.search(line) else []
            out.append(pytest.param(line, marks=marks, id=f"line{number}"))
    return out


@pytest.mark.parametrize("line", _bash_lines())
def test_bash_line(line, tmp_path):
    """Each command of the runnable bash blocks, verbatim, from a temporary folder."""
    workdir = _workdir(tmp_path)
    _reader_files(workdir)
    proc = run_bash(line, workdir)
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-3000:])
    for out in re.findall(r"--out (\S+)", line):
        assert (workdir / out).exists(), f"{out} was not written"


def _real_model_block() -> Block:
    return next(b for b in BLOCKS if b.first_line.startswith(".venv/bin/pmark keygen"))


def _commands(block: Block) -> list[list[str]]:
    return [shlex.split(line, comments=True) for line in block.code.splitlines() if line.strip()]


_TINY_RUNNER = """
    import sys

    import torch

    from pmark_impl import cli
    from pmark_impl.sampling._sampler import LMSentenceSampler, SamplingConfig
    from pmark_impl.sampling._tiny import make_tiny_lm
    from pmark_impl.cli import models


    def tiny_sampler(model, temperature, top_p):
        lm, tokenizer = make_tiny_lm(seed=0)
        return LMSentenceSampler(lm, tokenizer, SamplingConfig())


    torch.set_num_threads(1)  # 32x32 matmuls: threads cost more than they save
    models.load_sampler = tiny_sampler
    sys.exit(cli.main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_real_model_block_on_the_tiny_lm(tmp_path):
    """The real-model block's commands, the LM swapped for the tiny one (the encoder is the real MiniLM)."""
    runner = tmp_path / "tiny_pmark.py"
    runner.write_text(textwrap.dedent(_TINY_RUNNER))
    commands = _commands(_real_model_block())
    assert [c[:2] for c in commands] == [
        [".venv/bin/pmark", "keygen"],
        [".venv/bin/pmark", "generate"],
        [".venv/bin/pmark", "detect"],
        [".venv/bin/pmark", "demo"],
    ]
    for argv in commands[:3]:  # the demo has its own tiny-LM test (tests/pmark_impl/test_demo.py)
        args = argv[1:]
        if args[0] == "generate":
            args[-1] = "the cat sat."  # a prompt in the tiny vocabulary
        proc = subprocess.run(
            [sys.executable, str(runner), *args],
            cwd=tmp_path,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, (args, proc.stderr[-3000:])
    assert (tmp_path / "my.key").exists() and (tmp_path / "text.txt").read_text().strip()
    import json

    verdict = json.loads(proc.stdout)
    assert 0 < verdict["p_value"] <= 1 and verdict["n_sentences"] >= 1


@pytest.mark.slow
def test_real_model_block_verbatim(tmp_path):
    """The real-model block as written, on SmolLM2 (several minutes on 2 cores)."""
    block = _real_model_block()
    proc = run_bash(block.code, _workdir(tmp_path), timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert '"p_value"' in proc.stdout
