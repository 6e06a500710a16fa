"""The inputs of ``pmark evaluate``, checked before any model loads: runs, device, key file, calibrations.

Every function here raises a one-line user error (:class:`~pmark_impl.cli.files.CLIError`, ``PMarkValueError``,
``KeyFileError``) for a bad input; :mod:`pmark_impl.cli.evaluate` calls them in order before loading a model.
"""

from __future__ import annotations

import argparse
from typing import Any

from pmark_impl.cli import models
from pmark_impl.cli.files import CLIError
from pmark_theory._validate import PMarkValueError

__all__ = [
    "DEFAULT_ATTACKS",
    "calibrate_key",
    "calibration_files",
    "calibrations",
    "check_calibration_names",
    "check_settings",
    "evaluation_device",
    "evaluation_key",
    "model_label",
    "parse_runs",
    "read_key_file",
]

#: The attacks evaluated without ``--attack``.
DEFAULT_ATTACKS = ("word-delete:rate=0.15",)


def parse_runs(args: argparse.Namespace) -> tuple[Any, ...]:
    """The runs of ``--schemes``, ``--attack``, ``--grid`` and the scheme settings (flags, ``--set``), checked."""
    from pmark_impl.evaluate import build_runs, parse_attacks, parse_grid

    schemes = [s.strip() for s in str(args.schemes).split(",") if s.strip()]
    attacks = [a for spec in (args.attack or DEFAULT_ATTACKS) for a in parse_attacks(spec)]
    grid = parse_grid(args.grid) if args.grid is not None else None
    from pmark_impl.cli.scheme_options import parse_set
    from pmark_impl.schemes import known_options

    options = {name: getattr(args, name) for name in known_options() if getattr(args, name, None) is not None}
    for name, value in parse_set(getattr(args, "scheme_set", None)).items():
        if name in options:
            raise PMarkValueError(f"{name} is given both as a flag and with --set")
        options[name] = value
    return build_runs(
        schemes, attacks, n_candidates=args.n, channels=args.channels, grid=grid, cli_defaults=True, **options
    )


def evaluation_device(args: argparse.Namespace, world: Any) -> str | None:
    """``--device`` checked (``None`` without it); ``cuda`` is this rank's GPU under a distributed launcher."""
    from pmark_impl.cli.options import device_type as parse_device

    if args.device is None:
        return None
    try:
        device = parse_device(args.device)
    except argparse.ArgumentTypeError as exc:
        raise CLIError(f"--device: {exc}") from None
    if device == "cuda" and world.distributed:
        return f"cuda:{world.local_rank}"
    return device


def read_key_file(args: argparse.Namespace, channels: int) -> Any:
    """The key of ``--key`` (``None`` without it), checked before any model is loaded."""
    if args.key is None:
        return None
    from pmark_impl.keys import KeyFileError, load_key

    key = load_key(args.key)  # a missing / corrupt / insecure key file fails here
    if key.channels < channels:
        raise KeyFileError(f"key file {args.key} has {key.channels} channels; the runs need b = {channels}")
    return key


def check_settings(runs: Any, key: Any) -> None:
    """Each run's settings against its scheme's rules with the key at hand (a SemStamp green size ``round(γ M)``
    within ``1..M-1`` for ``M`` cells: the key's fitted ``k`` by default), before the folder is made or a model loads.

    Without ``--key`` the evaluation key is made later from ``--key-seed``; a key of the same kind (fresh, without
    fitted centroids) stands in for it here.
    """
    import numpy as np

    from pmark_impl.keys import WatermarkKey
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


def evaluation_key(args: argparse.Namespace, key: Any, encoder: Any, channels: int) -> Any:
    """``key`` (from :func:`read_key_file`) checked against the encoder, or an evaluation key from ``--key-seed``."""
    import numpy as np

    from pmark_impl.keys import KeyFileError, WatermarkKey

    if key is None:  # an evaluation key: reproducible from --key-seed, never saved
        return WatermarkKey.generate(
            np.random.default_rng(args.key_seed), encoder.name, encoder.dim, channels
        )
    if key.dim != int(encoder.dim):
        raise KeyFileError(f"key file {args.key} is for dimension {key.dim}, the encoder has {encoder.dim}")
    return key


def calibrations(args: argparse.Namespace, encoder: Any, runs: Any) -> dict[str, Any]:
    """The detector calibration of each run's scheme that declares one: ``--calibration SCHEME=FILE``, else
    fitted on the built-in corpus with the run's settings (``SchemeCalibration.fit``)."""
    from pmark_impl._corpus import builtin_documents
    from pmark_impl.schemes import get_scheme, resolve_settings

    files = dict(calibration_files(args))
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


def calibrate_key(
    args: argparse.Namespace, key: Any, encoder: Any, runs: Any, alphas: Any, max_sentences: int = 16
) -> tuple[Any, dict]:
    """The evaluation key calibrated for every run's scheme whose calibration is stored in the key
    (``SchemeCalibration.fit_key``, K1), on the built-in corpus's calibration half, and the record of it
    (``config.json``'s ``key_calibration``: on/off and each fit's held-out FPR at ``alphas`` with its interval).

    ``--uncalibrated-key`` keeps the key as given (a ``--key-seed`` key is then uncalibrated: the paper's protocol).
    The corpus is embedded once for all fits. Where the run's default test is one of the scheme's per-key tests
    (``SchemeCalibration.null_tests`` names ``None``: SemStamp's and k-SemStamp's green count), its text-level
    null is fitted too, for lengths 2 to ``max_sentences`` (K3), so the evaluation decides as a deployed,
    calibrated key would.
    """
    import json

    import numpy as np

    from pmark_impl._corpus import builtin_documents, corpus_fingerprint
    from pmark_impl.cli.calibrate_null import caching_embed
    from pmark_impl.sampling import embed
    from pmark_impl.schemes import get_scheme, resolve_settings, scheme_options

    if args.uncalibrated_key:
        return key, {"calibrated": False}
    documents = builtin_documents()

    def embed_new(sentences: list[str]) -> np.ndarray:
        parts = []
        with models.progress_bar(len(sentences), "embedding the corpus") as bar:
            for i in range(0, len(sentences), 256):
                parts.append(embed(encoder, sentences[i : i + 256], key.dim))
                bar.update(len(parts[-1]))
        return np.concatenate(parts) if parts else np.zeros((0, key.dim))

    embed_fn = caching_embed(embed_new, key.dim)  # every fit (and text-level null) embeds a sentence once

    fits, done = [], set()
    for run in runs:
        scheme = None if run.scheme == "none" else get_scheme(run.scheme)
        cal = None if scheme is None else scheme.calibration
        if cal is None or cal.stored_in != "key" or cal.fit_key is None:
            continue
        settings = resolve_settings(scheme, dict(run.settings), key=key)
        shown = {o.name: settings.get(o.name) for o in scheme_options(scheme, "record")}
        ident = (id(cal.fit_key), json.dumps(shown, sort_keys=True, default=str))
        if ident in done:
            continue
        done.add(ident)
        try:
            key, report = cal.fit_key(
                key, encoder, documents, settings, embed_fn=embed_fn, alphas=tuple(alphas)
            )
        except PMarkValueError as exc:
            raise PMarkValueError(f"calibrating the evaluation key for {scheme.name}: {exc} (--uncalibrated-key "
                                  "evaluates the key as given)") from None  # fmt: skip
        fit = {"scheme": scheme.name, "calibration": cal.name, "settings": shown, **report["held_out_fpr"],
               "n_held_out_texts": report.get("n_held_out_texts")}  # fmt: skip
        if None in cal.null_tests:  # K3: the default test's text-level null
            key, fit["text_null"] = _fit_null(
                key, encoder, documents, scheme, run, settings, max_sentences, embed_fn
            )
        fits.append(fit)
    record = {"calibrated": True, "corpus": "builtin", "corpus_fingerprint": corpus_fingerprint(documents)}
    return key, {**record, "fits": fits}


def _fit_null(key, encoder, documents, scheme, run, settings, max_sentences, embed_fn) -> tuple[Any, dict]:
    """The key with the text-level null of ``run``'s default test (K3) and its record."""
    from pmark_impl.detection import fit_text_null
    from pmark_impl.schemes import scheme_options

    detect = {o.name: settings[o.name] for o in scheme_options(scheme, "record") if o.name in settings}
    options = {"scheme": scheme, "channels": run.channels, **detect}
    lengths = tuple(range(2, max(2, int(max_sentences)) + 1))
    key, null = fit_text_null(key, encoder, documents, options=options, lengths=lengths, embed_fn=embed_fn)
    n_texts = {str(t): len(p) for t, p in zip(null.null.lengths, null.null.null_p, strict=True)}
    return key, {"test": null.test, "signature": null.signature, "n_texts": n_texts}


def check_calibration_names(args: argparse.Namespace, runs: Any) -> None:
    """Refuse, before any model loads, a calibration for a scheme that no run uses or that has none."""
    from pmark_impl.schemes import get_scheme

    wanted = set()
    for run in runs:
        cal = None if run.scheme == "none" else get_scheme(run.scheme).calibration
        if cal is not None and cal.stored_in == "detector":
            wanted.add(run.scheme)
    for name, _ in calibration_files(args):
        if name not in wanted:
            raise CLIError(
                f"a calibration is given for {name!r}, but no run's scheme has a detector calibration by that name"
            )


def calibration_files(args: argparse.Namespace) -> list[tuple[str, str]]:
    """``(scheme, file)`` of ``--calibration SCHEME=FILE`` and ``--simmark-calibration FILE``."""
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


def _loaded_name(model: Any) -> str:
    """The name or path a model was loaded from (transformers' ``name_or_path``); ``""`` for one built in memory."""
    name = getattr(model, "name_or_path", None) or getattr(
        getattr(model, "config", None), "_name_or_path", None
    )
    return str(name) if name else ""


def _is_default_lm(loaded: str) -> bool:
    """Whether ``loaded`` (a ``name_or_path``) is the offline default LM's file or its folder."""
    import os

    from pmark_impl.sampling import DEFAULT_LM_NAME, default_lm_path

    if os.path.basename(loaded.rstrip("/")) == DEFAULT_LM_NAME:
        return True
    try:
        folder = os.path.dirname(default_lm_path())
    except (ImportError, OSError):
        return False
    return os.path.abspath(os.path.expanduser(loaded)) == os.path.abspath(folder)


def model_label(requested: str | None, model: Any) -> str:
    """The label of the LM that was loaded, for ``config.json``, ``results.json`` and the report (issue 28).

    The label names the model actually used, never a default it was assumed to be: for a model built in memory
    (the tiny LM of the tests and the audit, a model a loader hands over) its class and size, e.g.
    ``"LlamaForCausalLM (in memory, 43,090 parameters)"``; otherwise the name the user gave (``--model`` /
    ``--oracle``, as before, so earlier evaluation folders resume); without one, the default LM's file name
    (``SmolLM2-135M-Instruct.Q4_1.gguf``) only when what was loaded is that file, else the model's own
    ``name_or_path``.

    Args:
      requested: the name given on the command line (``None``: the default LM was asked for).
      model: the loaded model (a transformers model, or anything with ``name_or_path`` / ``config``), or
        ``None`` when the sampler exposes none.
    """
    from pmark_impl.sampling import DEFAULT_LM_NAME

    if model is None:  # a sampler without a model: only the name asked for is known
        return str(requested) if requested is not None else "unknown (the sampler exposes no model)"
    loaded = _loaded_name(model)
    if not loaded:
        try:
            size = f", {sum(int(p.numel()) for p in model.parameters()):,} parameters"
        except (AttributeError, TypeError):
            size = ""
        return f"{type(model).__name__} (in memory{size})"
    if requested is not None:
        return str(requested)
    return DEFAULT_LM_NAME if _is_default_lm(loaded) else loaded
