"""``pmark evaluate`` on the test models, as one rank of ``torchrun`` (tests/pmark_impl/test_evaluate.py).

Run as ``torchrun --standalone --nproc_per_node K tests/pmark_impl/_evaluate_worker.py EVALUATE-ARGS...`` (with
``--n-candidates``, not ``--n``, which torchrun's own parser takes for an abbreviation of its options): it
replaces the CLI's model loaders with the tiny LM and the bag-of-words encoder of the fast tests (the same
models, built the same way, in every process) and calls ``pmark evaluate``; the exit status is the CLI's.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def main(argv: list[str]) -> int:
    import torch

    torch.set_num_threads(1)
    from pmark_impl import cli
    from tests.pmark_impl.test_evaluate import install_test_models

    install_test_models(cli)
    return cli.main(["evaluate", *argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
