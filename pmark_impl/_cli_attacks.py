"""``pmark attacks`` (list the registered text attacks) and ``pmark attack`` (apply one to a text file).

The attacks are those of :mod:`pmark_impl.attacks` (``attack(text, rng) -> text``, deterministic given the
seed); see ``docs/attacks.md``. Parameters are given as ``--param name=value`` (the value read as JSON when it
parses, else as a string), human sentences for ``sentence-insert`` / ``copy-paste`` with ``--human-file``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np

from pmark_impl._cli_files import check_can_write, read_text, write_text
from pmark_theory._validate import PMarkValueError

__all__ = ["cmd_attack", "cmd_attacks", "parse_params"]


def parse_params(items: list[str] | None) -> dict[str, Any]:
    """``["rate=0.15", "human=..."]`` → ``{"rate": 0.15, ...}`` (JSON values where they parse)."""
    params: dict[str, Any] = {}
    for item in items or []:
        name, sep, raw = item.partition("=")
        if not sep or not name.strip():
            raise PMarkValueError(f"--param must be NAME=VALUE, got {item!r}")
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        params[name.strip()] = value
    return params


def cmd_attacks(args: argparse.Namespace) -> int:
    """Print every registered attack with its description and parameters (JSON with ``--json``)."""
    from pmark_impl.attacks import list_attacks

    specs = list_attacks()
    if args.json:
        doc = {
            name: {"description": s.description, "params": {k: repr(v) for k, v in s.params.items()}}
            for name, s in specs.items()
        }
        print(json.dumps(doc, indent=2))
        return 0
    for name, spec in specs.items():
        params = ", ".join(f"{k}={v!r}" for k, v in spec.params.items()) or "no parameters"
        print(f"{name:22s} {spec.description}  [{params}]")
    return 0


def cmd_attack(args: argparse.Namespace) -> int:
    """Apply attack ``NAME`` with its parameters to the text of ``FILE`` and print or write the result."""
    from pmark_impl._segment import split_sentences
    from pmark_impl.attacks import get_attack

    params = parse_params(args.param)
    if args.human_file is not None:
        human = split_sentences(read_text(args.human_file, what="--human-file"))
        if not human:
            raise PMarkValueError(f"--human-file {args.human_file} holds no sentence")
        # sentence-insert draws from ``sentences``, copy-paste embeds the text in ``human``.
        params["sentences" if args.name == "sentence-insert" else "human"] = human
    check_can_write(args.out, args.force)
    attack = get_attack(args.name, **params)
    text = read_text(args.file)
    attacked = attack(text, np.random.default_rng(args.seed))
    if args.out is None:
        print(attacked)
    else:
        write_text(args.out, attacked, args.force)
    return 0
