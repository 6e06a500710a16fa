"""What a newcomer sees, kept as a test (issue 38): the README's first commands, run as it writes them, in a fresh
folder, with progress shown as on a terminal (``PMARK_PROGRESS=1``) and an 100-column terminal (``COLUMNS``).

The transcript (every command, its exit status, stdout and stderr) is written to ``transcript.txt`` in the test's
temporary folder and printed when an assertion fails. What must hold:

* nothing on stderr comes from a third-party library: every stderr line (a tqdm redraw after ``\\r`` counts as a
  line) is empty or starts with ``pmark`` — no "Loading weights", GGUF conversion, deprecation or advisory
  notices, no traceback;
* ``pmark check`` prints one line per check that fits the terminal and ends with the one-line tally;
* every long step names its phase ("loading the encoder …: done in N s");
* ``pmark detect`` prints JSON whose first field is the plain ``reading``, whose counts are named for what they
  count, and says once (a ``note`` line) that the key is uncalibrated.

The real LM's commands (``pmark generate``, ``pmark demo``) run in the slow suite
(``tests/test_readme.py::test_real_model_block_verbatim``, ``tests/pmark_impl/test_demo.py``); here the encoder is
the shipped MiniLM and the text is human, so the run takes about 30 s on 2 cores.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pmark_impl._corpus import builtin_documents

VENV_BIN = Path(sys.executable).parent
COLUMNS = 100


def _run(log: list[str], cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PMARK_DEBUG", "PYTHONWARNINGS")}
    env.update(
        PMARK_PROGRESS="1",
        COLUMNS=str(COLUMNS),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
    )
    proc = subprocess.run(
        [str(VENV_BIN / argv[0]), *argv[1:]], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )
    log.append(
        f"$ {' '.join(argv)}   (exit {proc.returncode})\n--- stdout\n{proc.stdout}--- stderr\n{proc.stderr}"
    )
    return proc


def _foreign_lines(stderr: str) -> list[str]:
    """stderr lines (split at newlines and carriage returns) that are neither empty nor the toolkit's own."""
    return [line for line in re.split(r"[\r\n]", stderr) if line.strip() and not line.startswith("pmark")]


@pytest.fixture
def transcript(tmp_path):
    log: list[str] = []
    yield log
    (tmp_path / "transcript.txt").write_text("\n".join(log), encoding="utf-8")


def test_the_readme_first_commands_read_cleanly(tmp_path, transcript):

    check = _run(
        transcript, tmp_path, "pmark", "check", "--quick", "--only", "C7", "X1", "--out", "my-report"
    )
    assert check.returncode == 0, "\n".join(transcript)
    assert not _foreign_lines(check.stderr), "\n".join(transcript)
    lines = check.stdout.splitlines()
    assert all(len(line) <= COLUMNS for line in lines), "\n".join(transcript)
    assert [line.split()[:2] for line in lines if line.startswith("PASS")] == [["PASS", "C7"], ["PASS", "X1"]]
    assert lines[-1].startswith("2 checks: ") and "all as expected" in lines[-1], lines[-1]
    assert (tmp_path / "my-report" / "report.md").is_file()

    keygen = _run(transcript, tmp_path, "pmark", "keygen", "--out", "my.key")
    assert keygen.returncode == 0 and not _foreign_lines(keygen.stderr), "\n".join(transcript)

    human = " ".join(builtin_documents()[0].sentences[:8])
    (tmp_path / "human.txt").write_text(human, encoding="utf-8")
    detect = _run(transcript, tmp_path, "pmark", "detect", "--key", "my.key", "human.txt")
    assert detect.returncode == 0, "\n".join(transcript)
    assert not _foreign_lines(detect.stderr), "\n".join(transcript)
    assert "pmark: loading the encoder" in detect.stderr and ": done in " in detect.stderr, detect.stderr
    assert detect.stderr.count("pmark detect: note:") == 1, detect.stderr  # uncalibrated, said once
    record = json.loads(detect.stdout)
    assert next(iter(record)) == "reading", record
    assert record["verdict"] == "no watermark detected", record
    assert record["reading"].startswith("no watermark"), record["reading"]
    assert set(record["counts"]) == {"key_bits_matched", "key_bits_read"}, record
    assert "statistics" not in record and "--verbose" in record["more"], record
