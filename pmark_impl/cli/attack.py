"""``pmark attacks`` (list the registered text attacks) and ``pmark attack`` (apply one to a text file).

The attacks are those of :mod:`pmark_impl.attacks` (``attack(text, rng) -> text``, deterministic given the
seed) and the registered attack plug-ins (``@plugin("attack")`` named ``module:function``, or entry points of the
group ``pmark.attacks``; anything else is refused before it runs); see ``docs/attacks.md``. Parameters are given
as ``--param name=value`` (the value read as strict JSON when it is JSON, else as a string; each name once),
human sentences for ``sentence-insert`` / ``copy-paste`` with ``--human-file``.

Provenance: when ``FILE`` has a record (``FILE.pmark.json`` beside it, or ``--provenance P``) and ``--out OUT`` is
given, ``OUT.pmark.json`` is written too: the generation's record with its per-sentence steps dropped and the
attack (name, parameters, seed) appended, so ``pmark detect OUT`` reads the attacked text with the generation's
scheme, prompt and channels instead of the defaults. Printing to stdout cannot carry it: a note on stderr says
to pass ``--provenance FILE.pmark.json`` to ``pmark detect``. ``--no-provenance`` carries nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import numpy as np

from pmark_impl.attacks import collect_params, parse_param_value, show
from pmark_impl.cli import models, progress
from pmark_impl.cli.files import check_paths, read_text
from pmark_impl.cli.options import SEED
from pmark_impl.cli.owned_files import check_outputs_replaceable, write_text_and_record
from pmark_impl.generation import load_provenance, provenance_path
from pmark_theory._validate import PMarkValueError

__all__ = ["HUMAN_PARAM", "add_parsers", "cmd_attack", "cmd_attacks", "parse_params"]

#: The parameter ``--human-file`` sets, per built-in attack (a plug-in gets ``human``).
HUMAN_PARAM = {"sentence-insert": "sentences", "copy-paste": "human"}


def parse_params(items: list[str] | None) -> dict[str, Any]:
    """``["rate=0.15", "human=..."]`` → ``{"rate": 0.15, ...}`` (strict JSON values where they are JSON).

    Raises:
      PMarkValueError: an item not written ``NAME=VALUE``, a name given twice, a JSON value with a repeated
        member or ``NaN`` / ``Infinity``.
    """
    pairs = []
    for item in items or []:
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise PMarkValueError(f"--param must be NAME=VALUE, got {show(item)}")
        pairs.append((name, parse_param_value(raw, f"--param {name}")))
    return collect_params(pairs, "--param")


def cmd_attacks(args: argparse.Namespace) -> int:
    """Print every registered attack with its description and parameters (JSON with ``--json``)."""
    from pmark_impl.attacks import attack_plugins, list_attacks

    specs = list_attacks()
    plugins = attack_plugins()
    if args.json:
        doc: dict[str, Any] = {
            name: {"description": s.description, "params": {k: repr(v) for k, v in s.params.items()}}
            for name, s in specs.items()
        }
        for name, targets in plugins.items():
            doc[name] = {"description": "plug-in (entry point, loaded when named)", "plugin": list(targets)}
        print(json.dumps(doc, indent=2))
        return 0
    for name, spec in specs.items():
        params = ", ".join(f"{k}={v!r}" for k, v in spec.params.items()) or "no parameters"
        print(f"{name:22s} {spec.description}  [{params}]")
    for name, targets in plugins.items():
        print(f"{name:22s} plug-in (entry point pmark.attacks -> {' | '.join(targets)}; loaded when named)")
    return 0


def cmd_attack(args: argparse.Namespace) -> int:
    """Apply attack ``NAME`` with its parameters to the text of ``FILE`` and print or write the result."""
    from pmark_impl.attacks import get_attack, list_attacks
    from pmark_impl.sampling import split_sentences

    record_in, record_out = _record_paths(args)
    check_paths(
        {"FILE": args.file, "--human-file": args.human_file, "--provenance": record_in},
        {"--out": args.out, "the attacked text's provenance record": record_out},
        args.force,
    )
    check_outputs_replaceable(
        {"--out": (args.out, "text"), "the attacked text's provenance record": (record_out, "record")},
        args.force,
    )
    params = parse_params(args.param)
    if args.human_file is not None:
        # sentence-insert draws from ``sentences``, copy-paste embeds the text in ``human``; a plug-in gets
        # ``human``.
        key = HUMAN_PARAM.get(args.name, None if args.name in list_attacks() else "human")
        if key is None:
            raise PMarkValueError(
                f"--human-file is for {' and '.join(HUMAN_PARAM)} only, not {show(args.name)}"
            )
        if key in params:
            raise PMarkValueError(f"--human-file and --param {key} both give {key}: give one of them")
        human = split_sentences(read_text(args.human_file, what="--human-file"))
        if not human:
            raise PMarkValueError(f"--human-file {args.human_file} holds no sentence")
        params[key] = human
    record = None if record_in is None else load_provenance(record_in)  # before an attack's model loads
    stale = _stale_record(args, record_out)
    models.quiet_model_loading()  # an attack may load a model (paraphrase: SmolLM2): no third-party bars
    with models.quiet_gguf_conversion(), progress.phase(f"preparing the {args.name} attack", after=1.0):
        attack = get_attack(args.name, **params)
    text = read_text(args.file)
    with progress.phase(f"attacking the text ({args.name})", after=1.0):
        attacked = attack(text, np.random.default_rng(args.seed))
    if args.out is None:
        print(attacked)
        if record is not None:
            print(
                f"pmark attack: the provenance record {record_in} is not carried to stdout: detect the attacked "
                f"text with --provenance {record_in} (or use --out to write one beside it)",
                file=sys.stderr,
            )
        return 0
    new_record = None
    if record is not None and record_out is not None:
        shown = {k: v for k, v in params.items() if k not in HUMAN_PARAM.values()}  # human text: not repeated
        note = json.dumps(shown, sort_keys=True, ensure_ascii=False, default=repr)
        new_record = record.attacked(args.name, note, args.seed)
    write_text_and_record(attacked, args.out, new_record, record_out, args.force)
    if stale is not None:  # after the text is written: a failed attack leaves the earlier pair as it was
        os.remove(stale)
    return 0


def _stale_record(args: argparse.Namespace, record_out: str | None) -> str | None:
    """``OUT.pmark.json`` of an earlier text, which the new ``OUT`` (getting no record of its own) must not keep:
    ``pmark detect OUT`` would follow it. Without ``--force`` it is refused; with it, a pmark record is returned
    (to be removed once the new text is written); anything else stays and is refused."""
    if args.out is None or record_out is not None or args.out == "-":
        return None
    stale = provenance_path(args.out)
    if not os.path.lexists(stale):
        return None
    if not args.force:
        raise PMarkValueError(
            f"{stale} describes another text and pmark detect would follow it for {args.out}: remove it, or "
            "use --force to replace it"
        )
    load_provenance(stale)  # only a pmark provenance record is ever removed
    return stale


def _record_paths(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """The record to read (``--provenance``, else ``FILE.pmark.json`` when it exists) and the one to write."""
    if args.no_provenance:
        if args.provenance is not None:
            raise PMarkValueError("give either --provenance FILE or --no-provenance, not both")
        return None, None
    record_in = args.provenance
    if record_in is None and args.file != "-" and os.path.lexists(provenance_path(args.file)):
        record_in = provenance_path(args.file)
    if record_in is None or args.out is None:
        return record_in, None
    return record_in, provenance_path(args.out)


def add_parsers(sub: Any) -> None:
    """Add the ``attacks`` and ``attack`` subcommands to ``sub``."""
    p = sub.add_parser(
        "attacks", help="list the registered text attacks and their parameters (docs/attacks.md)"
    )
    p.add_argument("--json", action="store_true", help="print the list as JSON")
    p.set_defaults(func=cmd_attacks)

    p = sub.add_parser("attack", help="apply a registered text attack to FILE (deterministic given --seed)")
    p.add_argument("name", metavar="NAME", help="attack name (see 'pmark attacks') or module:function")
    p.add_argument("file", metavar="FILE", help="UTF-8 text file ('-' for stdin)")
    p.add_argument(
        "--param",
        action="append",
        metavar="NAME=VALUE",
        help="an attack parameter, e.g. rate=0.15 (repeatable)",
    )
    p.add_argument(
        "--human-file", default=None, metavar="F", help="human text for sentence-insert / copy-paste"
    )
    p.add_argument("--seed", type=SEED, default=0, help="seed of the attack's generator (default 0)")
    p.add_argument(
        "--out", default=None, metavar="FILE", help="write the attacked text here (default: stdout)"
    )
    p.add_argument(
        "--provenance",
        default=None,
        metavar="P",
        help="FILE's provenance record (default: FILE.pmark.json when it exists); with --out, OUT.pmark.json "
        "gets the record with this attack appended, so 'pmark detect OUT' follows the generation",
    )
    p.add_argument("--no-provenance", action="store_true", help="read and write no provenance record")
    p.add_argument(
        "--force",
        action="store_true",
        help="overwrite --out (and its .pmark.json record) if it exists (regular files only)",
    )
    p.set_defaults(func=cmd_attack)
