"""The examples of ``docs/*.md`` run as written (issue 38), as the README's do (``tests/test_readme.py``).

Every fenced ```python block runs in a fresh interpreter in a temporary folder; every ```bash block runs command by
command (a line ending in ``\\`` continues the command) with ``bash -euo pipefail`` in a temporary folder where
``.venv`` links to the repository's environment (and ``examples`` to the repository's ``examples/``: the docs'
commands are typed at the repository root). Other blocks are not run: untagged blocks are diagrams and folder
listings (they must not hold a command), ```toml blocks must parse as TOML, ```json blocks as JSON.

A block preceded by ``<!-- docs-test: skip (REASON) -->`` (or ``<!-- readme-test: skip (REASON) -->``) is not run;
:data:`SKIPPED` names, for each such block, the test that covers it, and that test must exist. A python/bash block
with neither a run here nor a skip with coverage fails :func:`test_every_block_runs_or_is_covered`.

What runs where:

- default suite: the python blocks of architecture.md (then the sketched check, quick budget: confirmed, control
  failed, as the page says), attacks.md (both; the plug-in block is also the reader's ``mypkg/attacks.py``),
  localisation.md, and evaluate.md's on the tiny LM and a bag-of-words encoder (:func:`test_python_block`, the
  loaders swapped by a prelude); every command of the audit.md and evaluate.md bash blocks is parsed by the
  ``pmark`` argument parser (:func:`test_commands_parse`);
- slow (``-m slow``; minutes each): the audit.md commands verbatim (SmolLM2 for ``--lm default``), the two
  security.md reproductions, and evaluate.md's python block verbatim on SmolLM2 + MiniLM;
- skipped with coverage: evaluate.md's bash block (SmolLM2 for hours, a GPU, a c4.jsonl the reader supplies).
"""

from __future__ import annotations

import ast
import json
import re
import shlex
import textwrap
import tomllib
from pathlib import Path

import pytest

from tests._doc_blocks import ROOT, Block, parse_blocks, run_bash, run_python, skip_marker, workdir

DOCS = sorted((ROOT / "docs").glob("*.md"))
TAGS = ("readme-test", "docs-test")
_SKIP = skip_marker(TAGS)

#: (docs file, first line of a skipped block) -> the test that covers it (a node id ``path::function``).
SKIPPED = {
    ("evaluate.md", ".venv/bin/pmark evaluate"): "tests/pmark_impl/test_evaluate.py::test_report_folder",
}
#: Tests that cover the skipped blocks besides :data:`SKIPPED`'s (same block, other aspects).
ALSO_COVERED_BY = {
    ("evaluate.md", ".venv/bin/pmark evaluate"): [
        "tests/pmark_impl/test_evaluate.py::test_torchrun_two_processes_equal_one",
        "tests/pmark_impl/test_evaluate_smollm2.py::test_offline_tpr_and_token_cost_on_smollm2",
        "tests/test_docs_examples.py::test_commands_parse",
    ],
}

#: Languages of blocks that are run, and of those that are only read.
RUN_LANGS = {"python", "bash"}
READ_LANGS = {"", "text", "json", "toml"}


def _all_blocks() -> list[tuple[str, Block]]:
    return [(p.name, b) for p in DOCS for b in parse_blocks(p.read_text(encoding="utf-8"), TAGS)]


BLOCKS = _all_blocks()


def _id(name: str, block: Block) -> str:
    return f"{name.removesuffix('.md')}-line{block.line}"


def _commands(block: Block) -> list[tuple[int, str]]:
    """``(line, command)`` of a bash block; a line ending in a backslash continues on the next one."""
    out: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for k, line in enumerate(block.code.splitlines()):
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if not pending:
            start = block.line + k
        pending.append(line)
        if not line.endswith("\\"):
            out.append((start, "\n".join(pending)))
            pending = []
    assert not pending, f"a command ends in a backslash at line {start}"
    return out


# ---------------------------------------------------------------------------------------------------- structure


def test_every_docs_file_is_read():
    names = {p.name for p in DOCS}
    assert {
        "architecture.md",
        "attacks.md",
        "audit.md",
        "evaluate.md",
        "localisation.md",
        "security.md",
    } <= names
    with_runnable = {n for n, b in BLOCKS if b.lang in RUN_LANGS}
    assert {"architecture.md", "attacks.md", "audit.md", "evaluate.md", "localisation.md", "security.md"} <= (
        with_runnable
    )


def test_blocks_and_skip_markers_are_well_formed():
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        blocks = parse_blocks(text, TAGS)
        assert len(_SKIP.findall(text)) == sum(b.skip is not None for b in blocks), (
            f"stray marker in {path.name}"
        )
        assert text.count("```") == 2 * len(blocks), f"an unparsed fence in {path.name}"
    for name, block in BLOCKS:
        assert block.lang in RUN_LANGS | READ_LANGS, f"{name}:{block.line}: unknown language {block.lang!r}"
        if block.skip is not None:
            assert block.skip.strip() and block.lang in RUN_LANGS, f"{name}:{block.line}"


def _skip_entry(name: str, block: Block) -> tuple[str, str] | None:
    """The key of :data:`SKIPPED` for a skipped block."""
    return next((k for k in SKIPPED if k[0] == name and block.first_line.startswith(k[1])), None)


def _resolves(node_id: str) -> bool:
    path, _, function = node_id.partition("::")
    file = ROOT / path
    return file.is_file() and re.search(rf"^def {re.escape(function)}\(", file.read_text(), re.M) is not None


def test_every_block_runs_or_is_covered():
    """A python/bash block is run here, or is marked skip and named in SKIPPED with an existing test: no drift."""
    used = set()
    for name, block in BLOCKS:
        if block.lang not in RUN_LANGS:
            continue
        if block.skip is None:  # run: every unskipped python/bash block parametrizes a test below (_RUN)
            continue
        entry = _skip_entry(name, block)
        assert entry is not None, f"{name}:{block.line} is marked skip but SKIPPED names no test for it"
        used.add(entry)
    assert used == set(SKIPPED), f"SKIPPED names blocks that are not skipped: {set(SKIPPED) - used}"
    for test in [*SKIPPED.values(), *(t for ts in ALSO_COVERED_BY.values() for t in ts)]:
        assert _resolves(test), f"{test} does not exist"


_COMMAND_START = re.compile(r"^\s*(\$ |\.venv/bin/|pmark |python |bash |torchrun )")


def test_read_only_blocks_parse_and_hold_no_command():
    for name, block in BLOCKS:
        where = f"{name}:{block.line}"
        if block.lang == "json":
            json.loads(block.code)  # a command's output, as printed
        elif block.lang == "toml":
            tomllib.loads(block.code)
        elif block.lang in ("", "text"):
            assert not any(_COMMAND_START.match(ln) for ln in block.code.splitlines()), (
                f"{where}: a command in an untagged block: tag it ```bash so that it runs"
            )


# ------------------------------------------------------------------------------------------------- python blocks

#: The reader's files: a block whose first line is ``# path -- ...`` is that file (here attacks.md's plug-in).
_FILE_BLOCK = re.compile(r"^# (?P<path>[\w/]+\.py)\b")


def _reader_files(dest: Path) -> None:
    (dest / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    for _, block in BLOCKS:
        m = _FILE_BLOCK.match(block.first_line) if block.lang == "python" else None
        if m:
            target = dest / m["path"]
            target.parent.mkdir(parents=True, exist_ok=True)
            for parent in target.relative_to(dest).parents:
                if str(parent) != ".":
                    (dest / parent / "__init__.py").touch()
            target.write_text(block.code, encoding="utf-8")


#: evaluate.md's python block on small models: the LM and encoder loaders and the key are swapped for the tiny LM,
#: a bag-of-words encoder and a key for it; the block itself runs unchanged.
_EVALUATE_PRELUDE = """
    import math
    import sys

    import numpy as np
    import torch

    sys.path.insert(0, {root!r})
    import pmark_impl.sampling as sampling
    from pmark_impl.keys import WatermarkKey, save_key
    from tests.pmark_impl.test_defaults_e2e import ENCODER
    from tests.pmark_impl.test_power_real import RICH_CORPUS

    torch.set_num_threads(1)
    sampling.load_lm = lambda *a, **k: sampling.make_tiny_lm(
        seed=0, corpus=RICH_CORPUS, end_bias=3.0, eos_bias=-math.inf
    )
    sampling.load_encoder = lambda *a, **k: ENCODER
    save_key(WatermarkKey.generate(np.random.default_rng(0), ENCODER.name, ENCODER.dim, 4), "my.key")
"""
_EVALUATE_CHECK = """
    import json
    from pathlib import Path

    assert json.loads(Path("my-eval/results.json").read_text())
"""
_EVALUATE_CHECK_CODE = textwrap.dedent(_EVALUATE_CHECK)


def _python_params() -> list:
    out = []
    for name, block in BLOCKS:
        if block.lang == "python" and block.skip is None:
            out.append(pytest.param(name, block, id=_id(name, block)))
    return out


#: The (docs file, block) pairs run here (filled by the parametrisations).
_RUN: set = {tuple(p.values) for p in _python_params()}


#: Appended to a block (by docs file and first line): a check of what the page says around it.
_AFTER = {
    ("architecture.md", "import jax"): """
        from proofs_checks import Budget

        outcome = check_e20(jax.random.key(0), Budget(quick=True))
        assert outcome.verdict == "confirmed" and outcome.control.failed, outcome
    """,
    ("evaluate.md", "from pmark_impl import"): _EVALUATE_CHECK,
}


def _after(name: str, block: Block) -> str:
    return next(
        (
            textwrap.dedent(code)
            for (n, first), code in _AFTER.items()
            if n == name and block.first_line.startswith(first)
        ),
        "",
    )


@pytest.mark.parametrize(("name", "block"), _python_params())
def test_python_block(name, block, tmp_path):
    _reader_files(tmp_path)
    prelude = ""
    if name == "evaluate.md":
        prelude = textwrap.dedent(_EVALUATE_PRELUDE).format(root=str(ROOT))
    code = prelude + block.code + _after(name, block)
    ast.parse(block.code)
    proc = run_python(code, tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]


# --------------------------------------------------------------------------------------------------- bash blocks

#: Exit status a command documents (the audit of a target that fails a guarantee exits 1).
_EXPECTED_RC = {
    "examples.audit_targets.soft_z:make_target": 1,  # fails fpr (audit.md's table of the examples)
    "examples.audit_targets.semstamp_z:make_target": 1,  # fails fpr at T = 3 and 5
}


def _bash_params() -> list:
    out = []
    for name, block in BLOCKS:
        if block.lang != "bash" or block.skip is not None:
            continue
        _RUN.add((name, block))
        for line, command in _commands(block):
            out.append(
                pytest.param(command, marks=[pytest.mark.slow], id=f"{name.removesuffix('.md')}-line{line}")
            )
    return out


@pytest.mark.parametrize("command", _bash_params())
def test_bash_command(command, tmp_path):
    """Each command of the docs' bash blocks, verbatim (all of them take minutes: slow)."""
    dest = workdir(tmp_path)
    _reader_files(dest)
    expected = next((rc for k, rc in _EXPECTED_RC.items() if k in command), 0)
    proc = run_bash(command, dest, timeout=3600)
    assert proc.returncode == expected, (proc.stdout[-2000:], proc.stderr[-3000:])
    for out in re.findall(r"--out (\S+)", command):
        assert (dest / out).exists(), f"{out} was not written"


@pytest.mark.slow
def test_evaluate_python_block_verbatim(tmp_path):
    """evaluate.md's python block as written, on SmolLM2 + MiniLM (many minutes on 2 cores)."""
    [block] = [b for n, b in BLOCKS if n == "evaluate.md" and b.lang == "python"]
    dest = workdir(tmp_path)
    assert run_bash(".venv/bin/pmark keygen --out my.key", dest).returncode == 0
    proc = run_python(block.code + _EVALUATE_CHECK_CODE, dest, timeout=7200)
    assert proc.returncode == 0, proc.stderr[-3000:]


def _pmark_argv(command: str) -> list[str] | None:
    """The ``pmark`` arguments of a command line (``None`` for another program)."""
    argv = [a for a in shlex.split(command.replace("\\\n", " "), comments=True) if a != "..."]
    while argv and re.match(r"^[A-Z_]+=", argv[0]):  # an environment assignment (PYTHONPATH=. pmark ...)
        argv = argv[1:]
    if argv[:1] in (["pmark"], [".venv/bin/pmark"]):
        return argv[1:]
    if argv[:1] == ["torchrun"]:
        return argv[argv.index("pmark_impl.cli") + 1 :]
    return None


def test_commands_parse():
    """Every ``pmark`` command of the docs' bash blocks (run or skipped) is accepted by ``pmark``'s parser."""
    from pmark_impl.cli import build_parser

    parsed = 0
    for name, block in BLOCKS:
        if block.lang != "bash":
            continue
        for line, command in _commands(block):
            argv = _pmark_argv(command)
            if argv is not None:
                build_parser().parse_args(argv)  # SystemExit on an unknown option
                parsed += 1
            else:
                assert command.startswith((".venv/bin/python -c", "bash run.sh ")), (
                    f"{name}:{line}: {command}"
                )
    assert parsed >= 9  # audit.md: 6, evaluate.md: 3
