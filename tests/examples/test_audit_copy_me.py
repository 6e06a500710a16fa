"""``examples/test_audit_copy_me.py`` passes when copied alone into an empty folder (no conftest, no repository
on the path beyond the installed package): run with pytest in a subprocess. The wheel-only run is in
``tests/test_wheel.py`` (slow)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # 15 s (a pytest in a subprocess); the default suite audits with its CONFIG in test_audit_power.py
def test_copy_me_file_passes_outside_the_repository(tmp_path):
    shutil.copy(ROOT / "examples" / "test_audit_copy_me.py", tmp_path / "test_audit_copy_me.py")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            str(tmp_path),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "2 passed" in run.stdout
