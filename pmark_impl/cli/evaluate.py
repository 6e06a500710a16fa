"""``pmark evaluate``: the paper's experiments on a real LM and a prompt set, into a resumable report (issue 14).

    pmark evaluate [--prompts builtin|FILE|hf:ID[:SPLIT]] [--field F] [--prompt-field F] [--format auto|jsonl|csv|text]
                   [--limit K] [--min-sentences M] [--max-sentences T]
                   [--schemes online,offline,semstamp,ksemstamp,simmark,none] [--n|--n-candidates N] [--channels b]
                   [--attack NAME[:param=v1,v2;...]]... [--localize-mode shifted|aligned|none]
                   [--grid 'N=8,16,32,64 b=1,2,3,4']
                   [--model M] [--encoder E] [--oracle M|same|none] [--device D] [--key KEY | --key-seed S]
                   [--uncalibrated-key]
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
import contextlib
import sys
from typing import Any

from pmark_impl.cli import evaluate_inputs, models, progress
from pmark_impl.cli.evaluate_inputs import DEFAULT_ATTACKS
from pmark_impl.cli.options import (
    SEED,
    add_batching_options,
    add_dtype_option,
    dtype_kwargs,
    float_type,
    int_type,
)

__all__ = ["DEFAULT_ATTACKS", "add_parser", "cmd_evaluate"]

DEFAULT_OUT = "pmark-evaluation"
DEFAULT_SCHEMES = "online,offline,none"


def add_parser(sub: Any) -> None:
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
        description="The paper's experiments on a prompt set, into a resumable report folder (docs/evaluate.md). "
        "Time grows with documents x sentences x schemes x candidates: the small run of `bash run.sh evaluate` "
        "(3 prompts x 4 sentences; online, offline and none; one attack): "
        "measured 4:55 wall, 8:28 CPU on 2 AMD EPYC cores (load 1.7 at start); "
        "the bar counts sentences and its ETA measures this machine.",
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
        "--localize-mode",
        choices=("shifted", "aligned", "none"),
        default="shifted",
        help="also localise the texts of copy-paste and sentence-insert and the human negatives (the report shows "
        "TPR with and without localisation): every alignment of the key's positions (shifted, default), the text "
        "as generated (aligned), or not at all (none)",
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
    add_dtype_option(g)
    g.add_argument("--temperature", type=float_type(0, 100, open_lo=True), default=None, help="(default 0.7)")
    g.add_argument("--top-p", type=float_type(0, 1, open_lo=True), default=None, help="(default 0.95)")
    g.add_argument(
        "--key", default=None, metavar="KEY", help="a key file (default: an evaluation key from --key-seed)"
    )
    g.add_argument("--key-seed", type=SEED, default=0, help="seed of the evaluation key (default 0)")
    g.add_argument(
        "--uncalibrated-key",
        action="store_true",
        help="evaluate the key as given (the paper's protocol); by default it is calibrated on the built-in "
        "corpus for every scheme whose calibration is stored in the key (PMark's centre, the cell masses of "
        "semstamp/ksemstamp; K1), and the report shows its held-out false-positive rate",
    )
    g = p.add_argument_group("run")
    g.add_argument("--seed", type=SEED, default=0, help="base seed of texts, attacks, detection (default 0)")
    g.add_argument("--out", default=DEFAULT_OUT, metavar="DIR", help=f"report folder (default {DEFAULT_OUT})")
    g.add_argument(
        "--force",
        action="store_true",
        help="replace an evaluation with other settings in --out (only the files pmark wrote there are deleted)",
    )
    add_batching_options(g)
    g.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_evaluate)


def _dtype(sampler: Any) -> dict[str, str]:
    """``{"dtype": ...}`` for weights other than float32 (an evaluation's law depends on it; older folders have
    float32 weights and no entry, so they resume unchanged)."""
    dtype = str(getattr(getattr(sampler, "model", None), "dtype", "torch.float32")).removeprefix("torch.")
    return {} if dtype == "float32" else {"dtype": dtype}


def _oracle(args: argparse.Namespace, sampler: Any, device: str | None) -> tuple[Any, Any] | None:
    if args.oracle == "none":
        return None
    if args.oracle == "same":
        return sampler.model, sampler.tokenizer
    from pmark_impl.sampling import load_lm

    with progress.phase(f"loading the language model {args.oracle} (the perplexity oracle)"):
        return load_lm(args.oracle, **({"device": device} if device else {}))


def _progress(
    args: argparse.Namespace, world: Any, units: int, max_sentences: int
) -> progress.StepBar | None:
    """This rank's bar (``None`` under ``--quiet``): one step per generated sentence of its ``units`` texts, topped
    up as each unit ends; it is ``run_evaluation``'s ``progress`` callback (``position`` = the rank)."""
    if args.quiet:
        return None
    desc = f"rank {world.rank}" if world.distributed else "pmark evaluate"
    return progress.StepBar(units, max_sentences, desc, position=world.rank)


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Run ``pmark evaluate`` (see the module docstring); prints where the report is.

    Each long step says so on stderr (:mod:`pmark_impl.cli.progress`: loading the models, calibrating the key),
    then one bar counts the generated sentences; ``--quiet`` hides them all.
    """
    with progress.hidden(args.quiet):
        return _evaluate(args)


def _evaluate(args: argparse.Namespace) -> int:
    from pmark_impl.evaluate import (
        EvalConfig,
        EvalContext,
        agreed_min,
        check_ours,
        check_prompt_lengths,
        finish,
        prompts_fingerprint,
        rank_units,
        read_prompts,
        run_evaluation,
        start,
        world_from_env,
    )

    world = world_from_env()
    runs = evaluate_inputs.parse_runs(args)  # every user error before a model is loaded
    config = EvalConfig(runs, max_sentences=args.max_sentences, seed=args.seed, localize=args.localize_mode)
    documents = read_prompts(
        args.prompts,
        field=args.field,
        prompt_field=args.prompt_field,
        fmt=args.format,
        limit=args.limit,
        min_sentences=args.min_sentences,
    )
    key_file = evaluate_inputs.read_key_file(args, config.max_channels)
    evaluate_inputs.check_settings(runs, key_file)
    evaluate_inputs.check_calibration_names(args, runs)
    check_ours(args.out)  # a folder pmark did not write is refused before any model loads (writes nothing)
    device = evaluate_inputs.evaluation_device(args, world)
    dev = {"device": device} if device else {}
    encoder = models.load_encoder(args.encoder, **dev)
    key = evaluate_inputs.evaluation_key(args, key_file, encoder, config.max_channels)
    with (
        progress.phase("calibrating the key on the built-in corpus (K1/K3)")
        if not args.uncalibrated_key
        else contextlib.nullcontext()
    ):
        key, key_calibration = evaluate_inputs.calibrate_key(
            args, key, encoder, runs, config.alphas, config.max_sentences
        )
    sampler = models.load_sampler(args.model, args.temperature, args.top_p, **dtype_kwargs(args), **dev)
    if args.shared_prefix:  # a model whose attention it does not cover: one line, before any work
        from pmark_impl.generation import check_shared_prefix

        check_shared_prefix(sampler)
    model_name = evaluate_inputs.model_label(args.model, getattr(sampler, "model", None))  # what was loaded
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
        calibrations=evaluate_inputs.calibrations(args, encoder, runs),
        model_name=model_name,
        batch_texts=args.batch_texts,
        refill=not args.no_refill,
        shared_prefix=args.shared_prefix,
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
            "min_sentences": args.min_sentences,  # the prompt filter (the detector's minimum is min_sentences)
        },
        "model": model_name,
        "encoder": str(getattr(encoder, "name", args.encoder)),
        "oracle": None
        if ctx.oracle is None
        else (
            model_name if args.oracle == "same" else evaluate_inputs.model_label(args.oracle, ctx.oracle[0])
        ),
        "key_fingerprint": key.fingerprint,
        "key": "file" if args.key else f"evaluation key, seed {args.key_seed}",
        "key_calibration": key_calibration,
        "sampling": {
            k: getattr(sampling, k)
            for k in ("temperature", "top_p", "top_k", "max_sentence_tokens")
            if hasattr(sampling, k)
        }
        | _dtype(sampler),
        "device": (device or "cpu").split(":")[0],
    }
    start(world)
    if ctx.batch_texts is None:  # the default group depends on the device: every rank takes the smallest
        from pmark_impl.generation import texts_per_batch

        ctx.batch_texts = agreed_min(world, texts_per_batch(ctx.sampler, None, ctx.shared_prefix))
    bar = _progress(args, world, rank_units(ctx, len(documents), world), config.max_sentences)
    ctx.on_sentence, ctx.on_stage = (
        getattr(bar, "step", None),
        getattr(bar, "stage", None),
    )  # not in config.json
    try:
        results = run_evaluation(
            ctx, documents, args.out, identity, world=world, force=args.force, progress=bar
        )
    finally:
        try:
            getattr(bar, "close", lambda: None)()
        finally:
            finish(world)  # the ranks' shutdown runs even if closing the display fails
    if results is not None:
        print(
            f"pmark: evaluation report in {args.out}/report.md, its tables as CSV and LaTeX in {args.out}/tables/ "
            f"({len(documents)} documents, {len(runs)} runs)",
            file=sys.stderr,
        )
    return 0


def _context_limit(sampler: Any) -> int | None:
    """The LM's context length (``max_position_embeddings``), if it states one."""
    cfg = getattr(getattr(sampler, "model", None), "config", None)
    n = getattr(cfg, "max_position_embeddings", None)
    return int(n) if isinstance(n, int) and n > 0 else None
