"""``pmark evaluate``: the paper's experiments on a real LM and a prompt set, calibrated and resumable (issue 14).

Modules, one concept each: :mod:`._prompts` (prompt sets and the paper's protocol), :mod:`._config` (runs,
attacks, the grid, checked up front), :mod:`._units` (one run's text for one document: generate, attack, detect),
:mod:`._runner` (the report folder, resuming, ranks), :mod:`._distributed` (``torchrun`` / ``accelerate``
ranks), :mod:`._aggregate` (``results.json`` with intervals and the predicted TPR), :mod:`._localize` (power with
localisation under ``copy-paste`` / ``sentence-insert``, issue 39), :mod:`._report`, :mod:`._report_detection` and
:mod:`._figures` (``report.md`` and the figures, read from ``results.json``). The statistics are
``pmark_theory._eval_stats``.
"""

from __future__ import annotations

from pmark_impl.evaluate._config import (
    NO_ATTACK,
    NO_SCHEME,
    AttackSpec,
    EvalConfig,
    RunSpec,
    build_runs,
    parse_attacks,
    parse_grid,
    unit_seed,
)
from pmark_impl.evaluate._distributed import World, agreed_min, finish, start, world_from_env
from pmark_impl.evaluate._folder import check_ours
from pmark_impl.evaluate._prompts import (
    EvalDocument,
    builtin_prompts,
    check_prompt_lengths,
    prompts_fingerprint,
    read_prompts,
)
from pmark_impl.evaluate._runner import EvaluationError, rank_units, run_evaluation
from pmark_impl.evaluate._units import CountingSampler, EvalContext, run_unit

__all__ = [
    "NO_ATTACK",
    "NO_SCHEME",
    "AttackSpec",
    "CountingSampler",
    "EvalConfig",
    "EvalContext",
    "EvalDocument",
    "EvaluationError",
    "RunSpec",
    "World",
    "agreed_min",
    "build_runs",
    "builtin_prompts",
    "check_ours",
    "check_prompt_lengths",
    "finish",
    "parse_attacks",
    "parse_grid",
    "prompts_fingerprint",
    "rank_units",
    "read_prompts",
    "run_evaluation",
    "run_unit",
    "start",
    "unit_seed",
    "world_from_env",
]
