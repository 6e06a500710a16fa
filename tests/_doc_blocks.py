"""Shared by the tests that run the documentation's snippets (``test_readme.py``, ``test_docs_examples.py``).

A fenced block is ```` ```LANG ```` ... ```` ``` ````, possibly indented (inside a list item: its code is dedented);
an HTML comment ``<!-- readme-test: skip (REASON) -->`` (or ``<!-- docs-test: skip (REASON) -->`` where the caller
accepts it) on the line just before it marks it as not run, with the reason.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent


def skip_marker(tags: tuple[str, ...] = ("readme-test",)) -> re.Pattern[str]:
    """The skip comment of any of ``tags``."""
    alternatives = "|".join(re.escape(t) for t in tags)
    return re.compile(rf"<!-- (?:{alternatives}): skip \((?P<reason>.*?)\) -->")


def _block_pattern(tags: tuple[str, ...]) -> re.Pattern[str]:
    marker = skip_marker(tags).pattern
    return re.compile(
        rf"(?:^[ \t]*{marker}\n)?^(?P<indent>[ \t]*)```(?P<lang>\w*)\n(?P<code>.*?)^(?P=indent)```$",
        re.S | re.M,
    )


@dataclass(frozen=True)
class Block:
    """One fenced code block of a Markdown file."""

    lang: str
    code: str
    line: int
    skip: str | None  # the reason, for a block marked skip

    @property
    def first_line(self) -> str:
        return self.code.splitlines()[0]


def parse_blocks(text: str, tags: tuple[str, ...] = ("readme-test",)) -> list[Block]:
    """The fenced blocks of ``text`` with their skip markers (``line``: 1-based line of the block's first code line)."""
    return [
        Block(m["lang"], textwrap.dedent(m["code"]), text.count("\n", 0, m.start("code")) + 1, m["reason"])
        for m in _block_pattern(tags).finditer(text)
    ]


def env() -> dict[str, str]:
    """The environment of a snippet: offline models, the repository's ``.venv/bin`` first on ``PATH``."""
    out = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    out.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false", TQDM_DISABLE="1")
    out["PATH"] = f"{VENV_BIN}{os.pathsep}{out.get('PATH', '')}"
    return out


def workdir(tmp_path: Path) -> Path:
    """A temporary folder whose ``.venv`` is the repository's environment."""
    (tmp_path / ".venv").symlink_to(VENV_BIN.parent, target_is_directory=True)
    return tmp_path


def run_python(code: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter from ``cwd``."""
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env(), capture_output=True, text=True, timeout=timeout
    )


def run_bash(code: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``code`` with ``bash -euo pipefail`` from ``cwd``."""
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", code],
        cwd=cwd,
        env=env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def command_lines(block: Block) -> list[tuple[int, str]]:
    """``(line number, command)`` of each command of a bash block (comment lines and blank lines left out)."""
    return [
        (block.line + k, line)
        for k, line in enumerate(block.code.splitlines())
        if line.strip() and not line.lstrip().startswith("#")
    ]
