"""``pmark evaluate``: the paper's experiments on a real LM and a prompt set, into a resumable report (issue 14).

    pmark evaluate [--prompts builtin|FILE|hf:ID[:SPLIT]] [--field F] [--prompt-field F] [--format auto|jsonl|csv|text]
                   [--limit K] [--min-sentences M] [--max-sentences T]
                   [--schemes online,offline,semstamp,ksemstamp,simmark,none] [--n|--n-candidates N] [--channels b]
                   [--attack NAME[:param=v1,v2;...]]... [--grid 'N=8,16,32,64 b=1,2,3,4']
                   [--model M] [--encoder E] [--oracle M|same|none] [--device D] [--key KEY | --key-seed S]
                   [--seed S] [--out DIR] [--force]

Everything the user gave is checked before a model is loaded (schemes, attacks, the grid, the prompt file, the
key file, and ``--out``: a new or empty folder or an evaluation folder, see :mod:`pmark_impl.evaluate._folder`),
and the prompts' lengths against the model before any generation; every error is one line and exit status 2.
``--force`` replaces an evaluation with other settings by deleting only the files its folder lists; a folder
that pmark did not write is refused even with ``--force``.

Under ``torchrun --nproc_per_node K -m pmark_impl.cli evaluate …`` (or ``accelerate launch``; write
``--n-candidates``, not ``--n``, which torchrun's parser reads as an abbreviation of its own options) each rank
takes every K-th document and rank 0 writes the report (:mod:`pmark_impl.evaluate._distributed`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pmark_theory._validate import PMarkValueError

__all__ = ["add_evaluate_parser", "cmd_evaluate"]

DEFAULT_OUT = "pmark-evaluation"
DEFAULT_SCHEMES = "online,offline,none"
DEFAULT_ATTACKS = ("word-delete:rate=0.15",)


def add_evaluate_parser(sub: Any, handler: Any, float_type: Any, int_type: Any, seed_type: Any) -> None:
    """Add the ``evaluate`` subcommand to ``sub`` (size bounds from :mod:`pmark_impl._limits`, as in generate)."""
    from pmark_impl._limits import (
        MAX_CANDIDATES,
        MAX_CHANNELS,
        MAX_CLUSTERS,
        MAX_LSH_DIM,
        MAX_OFFLINE_BATCH,
        MAX_SENTENCES,
        MAX_TRIALS,
    )

    p = sub.add_parser(
        "evaluate",
        help="the paper's experiments on a prompt set: detection (TPR at FPR, AUC, with intervals), robustness, "
        "cost and quality, predicted vs observed TPR, into a resumable report folder",
    )
    g = p.add_argument_group("prompts")
    g.add_argument(
        "--prompts",
        default="builtin",
        metavar="SRC",
        help="'builtin' (32 documents shipped with the toolkit, default), a .jsonl / .csv / text file (one document "
        "per line), or hf:DATASET[:SPLIT] where a hub is reachable",
    )
    g.add_argument(
        "--field", default="text", help="the document field of a .jsonl / .csv / hf source (default text)"
    )
    g.add_argument(
        "--prompt-field",
        default=None,
        help="take the prompt from this field and the human text from --field (default: the paper's protocol, "
        "the document's first sentence is the prompt and the rest the human text)",
    )
    g.add_argument("--format", default="auto", choices=("auto", "jsonl", "csv", "text"), help="file format")
    g.add_argument("--limit", type=int_type(1), default=None, help="use the first K usable documents")
    g.add_argument(
        "--min-sentences",
        type=int_type(1, 10_000),
        default=3,
        help="skip documents whose human text has fewer sentences (default 3)",
    )
    g.add_argument(
        "--max-sentences",
        type=int_type(1, MAX_SENTENCES),
        default=12,
        help="sentences per generated text at most; the human negative is cut to the text's count (default 12)",
    )
    g = p.add_argument_group("schemes and attacks")
    g.add_argument(
        "--schemes",
        default=DEFAULT_SCHEMES,
        help="comma-separated: online, offline, semstamp, ksemstamp, simmark, an installed plug-in's name or a "
        f"registered MODULE:ATTR (pmark schemes), and none: the LM unwatermarked (default {DEFAULT_SCHEMES})",
    )
    g.add_argument(
        "--n",
        "--n-candidates",
        dest="n",
        type=int_type(1, MAX_CANDIDATES),
        default=None,
        help="N of every scheme (default per scheme); under torchrun write --n-candidates (torchrun reads --n "
        "as an abbreviation of its own options)",
    )
    g.add_argument(
        "--channels", type=int_type(1, MAX_CHANNELS), default=4, help="b of online / offline (default 4)"
    )
    g.add_argument(
        "--attack",
        action="append",
        default=None,
        metavar="SPEC",
        help="NAME or NAME:param=v1,v2;param=v (one attack per value), repeatable; 'none' for no attack "
        f"(default {' '.join(DEFAULT_ATTACKS)}; see pmark attacks)",
    )
    g.add_argument(
        "--grid", default=None, help="the Table 3 sweep of online and offline, e.g. 'N=8,16,32,64 b=1,2,3,4'"
    )
    g.add_argument(
        "--offline-batch",
        type=int_type(1, MAX_OFFLINE_BATCH),
        default=None,
        help="offline batch (default 16)",
    )
    g.add_argument(
        "--lsh-dim", type=int_type(1, MAX_LSH_DIM), default=None, help="SemStamp LSH dimension (default 3)"
    )
    g.add_argument("--n-clusters", type=int_type(2, MAX_CLUSTERS), default=None, help="k-SemStamp clusters")
    g.add_argument(
        "--gamma", type=float_type(0, 1, open_lo=True, open_hi=True), default=None, help="green share"
    )
    g.add_argument(
        "--max-trials", type=int_type(1, MAX_TRIALS), default=None, help="SemStamp / SimMark batches"
    )
    g.add_argument("--simmark-low", type=float_type(-1, 1), default=None, help="SimMark interval start")
    g.add_argument("--simmark-high", type=float_type(-1, 1), default=None, help="SimMark interval end")
    g.add_argument(
        "--set",
        dest="scheme_set",
        action="append",
        default=None,
        metavar="NAME=VALUE",
        help="a setting of the schemes that have it (repeatable; VALUE is JSON or a plain string)",
    )
    g.add_argument(
        "--calibration",
        action="append",
        default=None,
        metavar="SCHEME=FILE",
        help="a scheme's detector calibration file (repeatable); default: measured on the built-in corpus",
    )
    g.add_argument(
        "--simmark-calibration",
        default=None,
        metavar="FILE",
        help="SimMark's gamma (pmark calibrate-simmark): --calibration simmark=FILE",
    )
    g = p.add_argument_group("models and key")
    g.add_argument("--model", default=None, help="LM name or path (default: SmolLM2-135M-Instruct, offline)")
    g.add_argument("--encoder", default=None, help="sentence encoder (default: all-MiniLM-L6-v2, offline)")
    g.add_argument(
        "--oracle",
        default="same",
        help="perplexity oracle LM: 'same' (the generating LM, default), a name or path, or 'none'",
    )
    g.add_argument(
        "--device", default=None, help="cpu, cuda, cuda:N or mps (under torchrun: cuda = this rank's GPU)"
    )
    g.add_argument("--temperature", type=float_type(0, 100, open_lo=True), default=None, help="(default 0.7)")
    g.add_argument("--top-p", type=float_type(0, 1, open_lo=True), default=None, help="(default 0.95)")
    g.add_argument(
        "--key", default=None, metavar="KEY", help="a key file (default: an evaluation key from --key-seed)"
    )
    g.add_argument("--key-seed", type=seed_type, default=0, help="seed of the evaluation key (default 0)")
    g = p.add_argument_group("run")
    g.add_argument(
        "--seed", type=seed_type, default=0, help="base seed of texts, attacks, detection (default 0)"
    )
    g.add_argument("--out", default=DEFAULT_OUT, metavar="DIR", help=f"report folder (default {DEFAULT_OUT})")
    g.add_argument(
        "--force",
        action="store_true",
        help="replace an evaluation with other settings in --out (only the files pmark wrote there are deleted)",
    )
    g.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=handler)


def _runs(args: argparse.Namespace) -> tuple[Any, ...]:
    from pmark_impl.evaluate._config import build_runs, parse_attacks, parse_grid

    schemes = [s.strip() for s in str(args.schemes).split(",") if s.strip()]
    attacks = [a for spec in (args.attack or DEFAULT_ATTACKS) for a in parse_attacks(spec)]
    grid = parse_grid(args.grid) if args.grid is not None else None
    from pmark_impl._cli_scheme import parse_set
    from pmark_impl.schemes._settings import known_options

    options = {name: getattr(args, name) for name in known_options() if getattr(args, name, None) is not None}
    for name, value in parse_set(getattr(args, "scheme_set", None)).items():
        if name in options:
            raise PMarkValueError(f"{name} is given both as a flag and with --set")
        options[name] = value
    from pmark_impl.schemes import get_scheme

    for name in schemes:  # pmark generate's defaults (an option's cli_default) for the schemes that have them
        try:
            scheme = None if name == "none" else get_scheme(name)
        except PMarkValueError:
            continue  # build_runs names it
        for opt in () if scheme is None else scheme.options:
            if opt.cli_default is not None and options.get(opt.name) is None:
                options[opt.name] = opt.cli_default
    return build_runs(schemes, attacks, n_candidates=args.n, channels=args.channels, grid=grid, **options)


def _device(args: argparse.Namespace, world: Any) -> str | None:
    from pmark_impl._cli_parser import _device as parse_device

    if args.device is None:
        return None
    try:
        device = parse_device(args.device)
    except argparse.ArgumentTypeError as exc:
        from pmark_impl._cli_files import CLIError

        raise CLIError(f"--device: {exc}") from None
    if device == "cuda" and world.distributed:
        return f"cuda:{world.local_rank}"
    return device


def _key_file(args: argparse.Namespace, channels: int) -> Any:
    """The key of ``--key`` (``None`` without it), checked before any model is loaded."""
    if args.key is None:
        return None
    from pmark_impl._keys import KeyFileError, load_key

    key = load_key(args.key)  # a missing / corrupt / insecure key file fails here
    if key.channels < channels:
        raise KeyFileError(f"key file {args.key} has {key.channels} channels; the runs need b = {channels}")
    return key


def _check_settings(runs: Any, key: Any) -> None:
    """Each run's settings against its scheme's rules with the key at hand (a SemStamp green size ``round(γ M)``
    within ``1..M-1`` for ``M`` cells: the key's fitted ``k`` by default), before the folder is made or a model loads.

    Without ``--key`` the evaluation key is made later from ``--key-seed``; a key of the same kind (fresh, without
    fitted centroids) stands in for it here.
    """
    import numpy as np

    from pmark_impl._keys import WatermarkKey
    from pmark_impl.schemes import get_scheme, resolve_settings

    if key is None:
        key = WatermarkKey.generate(np.random.default_rng(0), "stand-in", 2, 1)
    for run in runs:
        if run.scheme == "none":
            continue
        try:
            resolve_settings(get_scheme(run.scheme), dict(run.settings), key=key)
        except PMarkValueError as exc:
            raise PMarkValueError(f"run {run.run_id}: {exc}") from None


def _key(args: argparse.Namespace, key: Any, encoder: Any, channels: int) -> Any:
    """``key`` (from :func:`_key_file`) checked against the encoder, or an evaluation key from ``--key-seed``."""
    import numpy as np

    from pmark_impl._keys import KeyFileError, WatermarkKey

    if key is None:  # an evaluation key: reproducible from --key-seed, never saved
        return WatermarkKey.generate(
            np.random.default_rng(args.key_seed), encoder.name, encoder.dim, channels
        )
    if key.dim != int(encoder.dim):
        raise KeyFileError(f"key file {args.key} is for dimension {key.dim}, the encoder has {encoder.dim}")
    return key


def _calibrations(args: argparse.Namespace, encoder: Any, runs: Any) -> dict[str, Any]:
    """The detector calibration of each run's scheme that declares one: ``--calibration SCHEME=FILE``, else
    fitted on the built-in corpus with the run's settings (``SchemeCalibration.fit``)."""
    from pmark_impl._corpus import builtin_documents
    from pmark_impl.schemes import get_scheme, resolve_settings

    files = dict(_calibration_files(args))
    out: dict[str, Any] = {}
    for run in runs:
        if run.scheme == "none":
            continue
        scheme = get_scheme(run.scheme)
        cal = scheme.calibration
        if cal is None or cal.stored_in != "detector" or scheme.name in out:
            continue
        if scheme.name in files:
            out[scheme.name] = cal.load(files[scheme.name])
        else:
            settings = resolve_settings(scheme, dict(run.settings))
            out[scheme.name] = cal.fit(encoder, builtin_documents(), settings)
    return out


def _check_calibration_names(args: argparse.Namespace, runs: Any) -> None:
    """Refuse, before any model loads, a calibration for a scheme that no run uses or that has none."""
    from pmark_impl._cli_files import CLIError
    from pmark_impl.schemes import get_scheme

    wanted = set()
    for run in runs:
        cal = None if run.scheme == "none" else get_scheme(run.scheme).calibration
        if cal is not None and cal.stored_in == "detector":
            wanted.add(run.scheme)
    for name, _ in _calibration_files(args):
        if name not in wanted:
            raise CLIError(
                f"a calibration is given for {name!r}, but no run's scheme has a detector calibration by that name"
            )


def _calibration_files(args: argparse.Namespace) -> list[tuple[str, str]]:
    """``(scheme, file)`` of ``--calibration SCHEME=FILE`` and ``--simmark-calibration FILE``."""
    from pmark_impl._cli_files import CLIError

    pairs = [("simmark", args.simmark_calibration)] if args.simmark_calibration else []
    for item in args.calibration or []:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise CLIError(f"--calibration needs SCHEME=FILE, got {item[:60]!r}")
        pairs.append((name, path))
    names = [n for n, _ in pairs]
    if len(set(names)) != len(names):
        raise CLIError("a scheme's calibration is given twice")
    return pairs


def _oracle(args: argparse.Namespace, sampler: Any, device: str | None) -> tuple[Any, Any] | None:
    if args.oracle == "none":
        return None
    if args.oracle == "same":
        return sampler.model, sampler.tokenizer
    from pmark_impl._models import load_lm

    return load_lm(args.oracle, **({"device": device} if device else {}))


def _progress(args: argparse.Namespace, world: Any) -> Any:
    if args.quiet:
        return None
    from tqdm.auto import tqdm

    bar: dict[str, Any] = {}

    def update(label: str, done: int, total: int) -> None:
        if "bar" not in bar:
            bar["bar"] = tqdm(
                total=total,
                desc=f"rank {world.rank}" if world.distributed else "evaluate",
                unit="text",
                position=world.rank,
                file=sys.stderr,
                dynamic_ncols=True,
            )
        b = bar["bar"]
        b.set_postfix_str(label, refresh=False)
        b.update(done - b.n)
        if done == total:
            b.close()

    return update


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Run ``pmark evaluate`` (see the module docstring); prints where the report is."""
    from pmark_impl import cli
    from pmark_impl.evaluate._config import EvalConfig
    from pmark_impl.evaluate._distributed import finish, start, world_from_env
    from pmark_impl.evaluate._folder import check_ours
    from pmark_impl.evaluate._prompts import check_prompt_lengths, prompts_fingerprint, read_prompts
    from pmark_impl.evaluate._runner import run_evaluation
    from pmark_impl.evaluate._units import EvalContext

    world = world_from_env()
    runs = _runs(args)  # every user error before a model is loaded
    config = EvalConfig(runs, max_sentences=args.max_sentences, seed=args.seed)
    documents = read_prompts(
        args.prompts,
        field=args.field,
        prompt_field=args.prompt_field,
        fmt=args.format,
        limit=args.limit,
        min_sentences=args.min_sentences,
    )
    key_file = _key_file(args, config.max_channels)
    _check_settings(runs, key_file)
    _check_calibration_names(args, runs)
    check_ours(args.out)  # a folder pmark did not write is refused before any model loads (writes nothing)
    device = _device(args, world)
    dev = {"device": device} if device else {}
    encoder = cli._load_encoder(args.encoder, **dev)
    key = _key(args, key_file, encoder, config.max_channels)
    sampler = cli._load_sampler(args.model, args.temperature, args.top_p, **dev)
    if args.model is None:
        from pmark_impl._models import DEFAULT_LM_NAME

        model_name = DEFAULT_LM_NAME
    else:
        model_name = str(args.model)
    limit = _context_limit(sampler)
    if limit is not None:
        room = config.max_sentences * int(
            getattr(getattr(sampler, "config", None), "max_sentence_tokens", 64)
        )
        check_prompt_lengths(documents, sampler.tokenizer, max(1, limit - room))
    ctx = EvalContext(
        config=config,
        key=key,
        sampler=sampler,
        encoder=encoder,
        oracle=_oracle(args, sampler, device),
        calibrations=_calibrations(args, encoder, runs),
        model_name=model_name,
    )
    sampling = getattr(sampler, "config", None)
    identity = {
        **config.as_dict(),
        "prompts": {
            "source": args.prompts,
            "field": args.field,
            "prompt_field": args.prompt_field,
            "n_documents": len(documents),
            "fingerprint": prompts_fingerprint(documents),
        },
        "model": model_name,
        "encoder": str(getattr(encoder, "name", args.encoder)),
        "oracle": None if ctx.oracle is None else (model_name if args.oracle == "same" else args.oracle),
        "key_fingerprint": key.fingerprint,
        "key": "file" if args.key else f"evaluation key, seed {args.key_seed}",
        "sampling": {
            k: getattr(sampling, k)
            for k in ("temperature", "top_p", "top_k", "max_sentence_tokens")
            if hasattr(sampling, k)
        },
        "device": (device or "cpu").split(":")[0],
    }
    start(world)
    try:
        results = run_evaluation(
            ctx, documents, args.out, identity, world=world, force=args.force, progress=_progress(args, world)
        )
    finally:
        finish(world)
    if results is not None:
        print(
            f"pmark: evaluation report in {args.out}/report.md ({len(documents)} documents, {len(runs)} runs)",
            file=sys.stderr,
        )
    return 0


def _context_limit(sampler: Any) -> int | None:
    """The LM's context length (``max_position_embeddings``), if it states one."""
    cfg = getattr(getattr(sampler, "model", None), "config", None)
    n = getattr(cfg, "max_position_embeddings", None)
    return int(n) if isinstance(n, int) and n > 0 else None
