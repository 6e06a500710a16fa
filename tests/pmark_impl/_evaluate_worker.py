"""``pmark evaluate`` on the test models, as one rank of ``torchrun`` (tests/pmark_impl/test_evaluate.py).

Run as ``PMARK_EVALUATE_ARGS='[...]' torchrun --standalone --nproc_per_node K tests/pmark_impl/_evaluate_worker.py``
(the arguments as a JSON list in the environment: torchrun's own parser would take ``--n`` as an abbreviation of
its ``--nnodes`` / ``--nproc-per-node``): it
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


def main() -> int:
    import json

    import torch

    torch.set_num_threads(1)
    from pmark_impl import cli
    from tests.pmark_impl.test_evaluate import install_test_models

    install_test_models(cli)
    return cli.main(["evaluate", *json.loads(os.environ["PMARK_EVALUATE_ARGS"])])


if __name__ == "__main__":
    sys.exit(main())
