"""Command-line glue of provenance and devices: ``pmark generate`` writes the record, ``pmark detect`` follows it.

Kept out of the command modules so that their handlers stay thin. ``generate``: the record goes to
``--provenance FILE`` or, with ``--out TEXT``, to ``TEXT.pmark.json`` (both checked before any model is loaded,
never overwritten without ``--force``). ``detect``: ``--provenance FILE``, else ``FILE.pmark.json`` beside the
text when it exists (``--no-provenance`` ignores it); its mode, channels, prompt, ``N``, encoder, model, sampler
and SemStamp settings (``green_seeding`` included) are used, and a flag that says otherwise is an error (:func:`resolve_detection`); the
record of a scheme without key channels (``channels: null``) refuses ``--channels``. Without a record, detection
uses the flags or their defaults (:data:`pmark_impl.schemes.DEFAULT_SCHEME`, ``N = 16``, empty prompt).
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Mapping
from typing import Any

from pmark_impl.generation import Provenance, ProvenanceError, load_provenance, provenance_path
from pmark_impl.schemes import DEFAULT_SCHEME

__all__ = [
    "DETECT_DEFAULTS",
    "check_detection_flags",
    "detection_settings",
    "device_kwargs",
    "generation_provenance_path",
    "provenance_for_detection",
    "resolve_detection",
]

#: What ``pmark detect`` uses for a setting that neither a flag nor a provenance record gives.
DETECT_DEFAULTS: dict[str, Any] = {
    "mode": DEFAULT_SCHEME,
    "channels": None,
    "n_candidates": 16,
    "prompt": "",
    "encoder": None,
    "model": None,
    "temperature": None,
    "top_p": None,
}
#: The ``SamplingConfig`` default cap; only another recorded cap is passed to the sampler loader.
_DEFAULT_CAP = 48


def device_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """``{"device": D}`` for ``--device D`` after checking that this machine has it (``{}`` without the flag).

    Raises:
      PMarkValueError: the device is unknown or not available here (one line naming it).
    """
    device = getattr(args, "device", None)
    if device is None:
        return {}
    from pmark_impl.sampling import check_device

    return {"device": check_device(device)}


def generation_provenance_path(args: argparse.Namespace) -> str | None:
    """Where ``pmark generate`` writes the record: ``--provenance``, else ``--out`` + ``.pmark.json``, else none."""
    if args.provenance is not None:
        return str(args.provenance)
    return provenance_path(args.out) if args.out is not None else None


def provenance_for_detection(args: argparse.Namespace) -> tuple[Provenance | None, str | None]:
    """The record ``pmark detect`` follows and its path (``(None, None)`` when there is none).

    ``--provenance FILE`` must exist; ``FILE.pmark.json`` beside the text is read when present (a dangling
    link or a directory there is an error, not silently ignored); ``--no-provenance`` skips both.
    """
    if getattr(args, "no_provenance", False):
        if args.provenance is not None:
            raise ProvenanceError("give either --provenance FILE or --no-provenance, not both")
        return None, None
    path = args.provenance
    if path is None and args.file != "-":
        beside = provenance_path(args.file)
        path = beside if os.path.lexists(beside) else None
    if path is None:
        return None, None
    return load_provenance(path), str(path)


def detection_settings(args: argparse.Namespace, key: Any, explicit_prompt: str | None) -> dict[str, Any]:
    """The settings of ``pmark detect``: the provenance record's, checked against the flags, else the flags'.

    Args:
      args: the parsed ``detect`` arguments (``mode``, ``channels``, ``n``, ``encoder``, ``model``,
        ``temperature``, ``top_p``, ``provenance``, ``no_provenance``, ``file``).
      key: the detection key.
      explicit_prompt: the prompt given with ``--prompt`` / ``--prompt-file`` (``None``: not given).

    Returns:
      ``mode``, ``channels``, ``n_candidates``, ``prompt``, ``encoder``, ``model``, ``temperature``,
      ``top_p``, ``sampler_kwargs`` (extra loader arguments) and ``detect_kwargs`` (SemStamp settings), plus
      ``provenance`` (the path followed, or ``None``).

    Raises:
      ProvenanceError: an unreadable or malformed record, one for another key, or a flag contradicting it.
    """
    explicit = {
        "mode": ("--mode", args.mode),
        "channels": ("--channels", args.channels),
        "n_candidates": ("--n", args.n),
        "prompt": ("--prompt" if args.prompt_file is None else "--prompt-file", explicit_prompt),
        "encoder": ("--encoder", args.encoder),
        "model": ("--model", args.model),
        "temperature": ("--temperature", args.temperature),
        "top_p": ("--top-p", args.top_p),
    }
    cells = _setting_flags(args)
    prov, path = provenance_for_detection(args)
    if prov is None:
        out = {
            name: (flag_value if flag_value is not None else DETECT_DEFAULTS[name])
            for name, (_, flag_value) in explicit.items()
        }
        out.update(
            sampler_kwargs={},
            detect_kwargs={name: value for name, (_, value) in cells.items() if value is not None},
            provenance=None,
        )
        return out
    resolved = resolve_detection(prov, key, path or "", {**explicit, **cells})
    out = {name: resolved[name] for name in DETECT_DEFAULTS}
    out["model"] = _loader_model_name(resolved["model"])
    if explicit["encoder"][1] is None and out["encoder"] == key.encoder:
        out["encoder"] = None  # the key's own encoder: load it as usual
    cap = prov.sampling.get("max_sentence_tokens")
    out["sampler_kwargs"] = {"max_sentence_tokens": cap} if cap not in (None, _DEFAULT_CAP) else {}
    dtype = prov.sampling.get("dtype")
    if dtype not in (None, "float32"):  # the generation's weights: the resampled law is the generation's
        out["sampler_kwargs"]["dtype"] = dtype
    out["detect_kwargs"] = {k: v for k, v in resolved.items() if k not in out and k not in _RECORD_ONLY}
    out["provenance"] = path
    return out


#: What :func:`resolve_detection` returns beside the settings that are not detection keyword arguments.
_RECORD_ONLY = ("mode", "prompt", "channels", "n_candidates")


def _setting_flags(args: argparse.Namespace) -> dict[str, tuple[str, Any]]:
    """``setting -> (flag, value)`` of every scheme setting given as a flag or with ``--set`` (no scheme resolved)."""
    from pmark_impl.cli.scheme_options import flag_of, parse_set
    from pmark_impl.schemes import known_options

    out = {
        name: (flag_of(name), getattr(args, name))
        for name in known_options()
        if getattr(args, name, None) is not None
    }
    for name, value in parse_set(getattr(args, "scheme_set", None)).items():
        if name in out:
            raise ProvenanceError(f"{name} is given both as {flag_of(name)} and with --set")
        out[name] = (f"--set {name}", value)
    return out


def check_detection_flags(key: Any, settings: Mapping[str, Any], test: str | None, args: Any = None) -> str:
    """Refuse, right after the key is read and before any model loads, choices that detection would refuse.

    Args:
      key: the detection key.
      settings: :func:`detection_settings` (``mode``, ``detect_kwargs``, ``provenance``).
      test: ``--test`` (``None``: the default for the key and mode).
      args: the parsed arguments (the flags' names for messages), or ``None``.

    Returns:
      The test detection will use (:func:`pmark_impl.schemes._pmark_tests.resolve_test`, the rule :func:`pmark_impl.detect`
      applies).

    Raises:
      PMarkValueError: ``--test per_key`` with an uncalibrated key, a context-seeded key or outside offline mode,
        ``--test resample`` with a positional key or outside offline mode (the rules of ``resolve_test``); a
        scheme's flag with a scheme it does not apply to, or a bad setting (the scheme's own checks).
    """
    from pmark_impl.schemes import get_scheme, resolve_settings, scheme_test
    from pmark_theory._validate import PMarkValueError

    scheme = get_scheme(settings["mode"])
    if scheme.detect is None:
        raise PMarkValueError(f"scheme {scheme.name!r} has no detector")
    resolved = scheme_test(scheme, key, test)
    if args is not None and getattr(args, "localize", None):
        from pmark_impl.schemes import check_localizable

        check_localizable(scheme)
    if (
        settings.get("provenance") is None and args is not None
    ):  # with a record, resolve_detection checked them
        from pmark_impl.cli.scheme_options import cli_settings

        cli_settings(args, scheme, "detect", defaults=False)
    resolve_settings(scheme, settings.get("detect_kwargs", {}), side="detect", key=key)
    return resolved


def _loader_model_name(model: str | None) -> str | None:
    """A recorded default-LM label means "the offline default" (``None`` for the loader)."""
    from pmark_impl.sampling import DEFAULT_LM_ALIASES

    return None if model is None or model in DEFAULT_LM_ALIASES else model


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def resolve_detection(
    prov: Provenance, key: Any, path: str, explicit: Mapping[str, tuple[str, Any]]
) -> dict[str, Any]:
    """The detection settings of a text with provenance ``prov``; an explicit flag may only repeat them.

    Args:
      prov: the record.
      key: the detection key (its ``fingerprint`` must be the record's).
      path: the record's file, for messages.
      explicit: ``setting -> (flag, value)`` of the flags the user gave (``None`` values are ignored), with
        settings among ``mode``, ``channels``, ``n_candidates``, ``prompt``, ``encoder``, ``model``,
        ``temperature``, ``top_p``, ``green_seeding``.

    Returns:
      ``{"mode", "channels", "n_candidates", "prompt", "encoder", "model", "temperature", "top_p"}`` from the
      record (sampler settings ``None`` when the record has none) plus the SemStamp settings of
      :meth:`Provenance.detect_kwargs`.

    Raises:
      ProvenanceError: the record was written for another key, or a flag contradicts it.
    """
    from pmark_impl.schemes import get_scheme

    prov.check_key(key, path)
    out = prov.detect_kwargs()
    # the scheme's detection-only settings (PMark's soft count) are never recorded: a flag gives them
    detect_only = {o.name for o in get_scheme(prov.mode).options if o.detect and not o.generate}
    out.update(
        encoder=prov.encoder,
        model=prov.model,
        temperature=prov.sampling.get("temperature"),
        top_p=prov.sampling.get("top_p"),
    )
    for setting, (flag, value) in explicit.items():
        if value is None:
            continue
        if setting in detect_only:
            out[setting] = value
            continue
        if setting not in out or (setting == "channels" and out[setting] is None):  # None: no channels
            if _other_default(setting, value):  # another scheme's setting left at its default
                continue
            raise ProvenanceError(
                f"{flag} does not apply to the {prov.mode} text of provenance file {path}; drop {flag}"
            )
        recorded = out[setting]
        same = _same_value(value, recorded)
        if not same:
            raise ProvenanceError(
                f"{flag} {_short(value)} contradicts provenance file {path}, which records {setting} = "
                f"{_short(recorded)}; drop {flag} to follow the provenance (--no-provenance ignores it)"
            )
    return out


def _other_default(setting: str, value: Any) -> bool:
    from pmark_impl.schemes import is_default, known_options

    entries = known_options().get(setting, [])
    return bool(entries) and all(is_default(value, opt) for _, opt in entries)


def _same_value(value: Any, recorded: Any) -> bool:
    """Whether a flag repeats a recorded value: numbers (not bools) within float rounding, anything else equal."""

    def number(x: Any) -> bool:
        return isinstance(x, (int, float)) and not isinstance(x, bool)

    if number(value) and number(recorded):
        return math.isclose(float(value), float(recorded), rel_tol=1e-9, abs_tol=0.0) or value == recorded
    return type(value) is type(recorded) and value == recorded
