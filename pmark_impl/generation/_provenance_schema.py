"""The provenance file's schema: strict JSON parsing and field-by-field checks (no record classes here).

:func:`parse_provenance` turns the bytes of a provenance file into the validated fields of
:class:`pmark_impl.generation._provenance.Provenance`; every refusal is one :class:`ProvenanceError` line naming the file
and the field. Strict UTF-8, no ``NaN``/``Infinity``, no integer of more than 4300 digits, nesting only where
the schema has it (deeper JSON is a type error of the field, absurd depth a "nested too deeply" error),
exactly the documented fields (unknown or missing ones are errors), every number range-checked; a repeated
member name is refused (:func:`pmark_theory.infra.json.loads_strict`), never resolved to its last value. Every
size-like value (``n_candidates``, ``channels``, ``lsh_dim``, ``n_clusters``, ``max_trials``,
``offline_batch``, the steps, ``max_sentence_tokens``) is bounded by :mod:`pmark_impl._limits`, the bounds the
command line enforces too: a record edited to ``N = 65536`` or ``lsh_dim = 31`` is refused before any work.
``channels`` is ``null`` for a scheme that uses no key channels (``Scheme.channels`` false; an integer there, as
records before issue 37 hold, is read as it is) and an integer for one that does.
"""

from __future__ import annotations

import math
from typing import Any

from pmark_impl._limits import LIMITS, MAX_CANDIDATES, MAX_SENTENCE_TOKENS, MAX_SENTENCES, MAX_TRIALS
from pmark_impl._user_json import parse_user_json
from pmark_theory._validate import PMarkValueError
from pmark_theory.infra.files import decode_text

__all__ = [
    "FIELDS",
    "OPTIONAL_FIELDS",
    "PROVENANCE_FORMAT",
    "PROVENANCE_LIMIT_BYTES",
    "PROVENANCE_VERSION",
    "ProvenanceError",
    "parse_provenance",
]

PROVENANCE_FORMAT = "pmark-provenance"
PROVENANCE_VERSION = 1
#: Largest provenance file read (32 MiB: a 16 MiB text, its prompt and the per-sentence records).
PROVENANCE_LIMIT_BYTES = 32 << 20
#: The document's fields, in the order they are written.
FIELDS = tuple(
    "format version toolkit_version mode n_candidates channels seed prompt key_fingerprint encoder model "
    "sampling settings aligned steps note".split()
)
_OUTCOMES = ("sentence", "eos", "cap")
_SAMPLING = ("temperature", "top_p", "top_k", "max_sentence_tokens", "dtype")
#: Weight dtypes a record may name (the LM's logits, hence its law, depend on it; issue 26).
DTYPES = ("float32", "float64", "bfloat16", "float16")
#: Optional: the text attacks applied after generation, in order (``pmark attack`` appends one).
_ATTACK_FIELDS = ("name", "params", "seed")
#: Fields a record may lack: ``attacks`` (none applied) and ``text_sha256`` (the SHA-256 of the text file the
#: command line wrote beside the record, by which ``--force`` recognises that text as its own; a record made
#: from the Python API has none).
OPTIONAL_FIELDS = ("attacks", "text_sha256")
_MAX_ATTACKS = 64
_STEP_FIELDS = ("position", "text", "n_candidates_sampled", "tokens", "outcome", "trials", "fallback")
_MAX_SEED = 2**63 - 1
_MAX_NAME = 4096
#: A record has one step per sentence of the text: at most the sentences ``pmark generate`` writes.
_MAX_STEPS = MAX_SENTENCES


class ProvenanceError(PMarkValueError):
    """A provenance file cannot be used (missing, corrupt, wrong schema, another key) or contradicts a flag."""


def _parse(raw: bytes, path: str) -> dict[str, Any]:
    text = decode_text(raw, path, what="provenance file", error=ProvenanceError)
    if not text.strip():
        raise ProvenanceError(f"provenance file {path} is empty")
    # strict: a repeated member ("mode" twice) or NaN/Infinity is refused, never resolved silently
    doc = parse_user_json(text, f"provenance file {path}", ProvenanceError)
    if not isinstance(doc, dict) or doc.get("format") != PROVENANCE_FORMAT:
        raise ProvenanceError(
            f'{path} is not a PMark provenance file (expected "format": "{PROVENANCE_FORMAT}")'
        )
    version = doc.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version != PROVENANCE_VERSION:
        shown = repr(version) if len(repr(version)) <= 40 else f"{repr(version)[:37]}..."
        raise ProvenanceError(
            f"provenance file {path} has unsupported version {shown} (this pmark reads version "
            f"{PROVENANCE_VERSION})"
        )
    return doc


class _Fields:
    """Typed access to one JSON object of the record, with messages naming the file and the field."""

    def __init__(self, doc: Any, names: tuple[str, ...], where: str) -> None:
        if not isinstance(doc, dict):
            raise ProvenanceError(f"{where} must be a JSON object, got {type(doc).__name__}")
        unknown = sorted(str(k)[:40] for k in doc if k not in names)
        if unknown:
            raise ProvenanceError(f"{where} has unknown field(s) {', '.join(map(repr, unknown[:5]))}")
        missing = [n for n in names if n not in doc]
        if missing:
            raise ProvenanceError(f"{where} is missing the field(s) {', '.join(map(repr, missing))}")
        self.doc, self.where = doc, where

    def _bad(self, name: str, rule: str) -> ProvenanceError:
        value = repr(self.doc[name])
        shown = value if len(value) <= 40 else f"{value[:37]}..."
        return ProvenanceError(f"{self.where}: field {name!r} must be {rule}, got {shown}")

    def integer(self, name: str, lo: int, hi: int) -> int:
        v = self.doc[name]
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise self._bad(name, f"an integer in {lo}..{hi}")
        return v

    def number(
        self, name: str, lo: float, hi: float, *, open_lo: bool = False, open_hi: bool = False
    ) -> float:
        v = self.doc[name]
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        if not ok or not (lo < v if open_lo else lo <= v) or not (v < hi if open_hi else v <= hi):
            interval = f"{'(' if open_lo else '['}{lo:g}, {hi:g}{')' if open_hi else ']'}"
            raise self._bad(name, f"a number in {interval}")
        return float(v)

    def string(
        self, name: str, *, max_len: int = _MAX_NAME, printable: bool = True, empty: bool = False
    ) -> str:
        v = self.doc[name]
        if (
            not isinstance(v, str)
            or len(v) > max_len
            or (not empty and not v)
            or (printable and not v.isprintable())
        ):
            raise self._bad(
                name, f"a {'printable ' if printable else ''}string of at most {max_len} characters"
            )
        return v

    def choice(self, name: str, options: tuple[str, ...]) -> str:
        v = self.doc[name]
        if v not in options or not isinstance(v, str):
            raise self._bad(name, f"one of {', '.join(options)}")
        return v


def _sampling(doc: Any, where: str) -> dict[str, Any]:
    names = tuple(n for n in _SAMPLING if isinstance(doc, dict) and n in doc)
    f = _Fields(doc, names, where)
    out: dict[str, Any] = {}
    if "temperature" in names:
        out["temperature"] = f.number("temperature", 0.0, 1e6, open_lo=True)
    if "top_p" in names:
        out["top_p"] = f.number("top_p", 0.0, 1.0, open_lo=True)
    if "top_k" in names:
        out["top_k"] = f.integer("top_k", 0, 1 << 31)
    if "max_sentence_tokens" in names:
        out["max_sentence_tokens"] = f.integer("max_sentence_tokens", *LIMITS["max_sentence_tokens"])
    if "dtype" in names:
        out["dtype"] = f.choice("dtype", DTYPES)
    return out


def _scheme(f: Any, where: str) -> Any:
    """The scheme the record names (built-in, installed, or loaded in this process); nothing else is imported."""
    from pmark_impl.schemes import get_scheme, scheme_names

    name = f.string("mode", max_len=64)
    if ":" in name or name not in scheme_names():
        raise ProvenanceError(
            f"{where} names scheme {name[:64]!r}, which is not installed here (known: {', '.join(scheme_names())}); "
            "install its package or name it with --scheme MODULE:ATTRIBUTE"
        )
    try:
        return get_scheme(name)
    except PMarkValueError as exc:
        raise ProvenanceError(f"{where}: {exc}") from None


def _settings(doc: Any, scheme: Any, n: int, channels: int | None, where: str) -> dict[str, Any]:
    from pmark_impl.schemes import recorded_settings

    try:
        out = recorded_settings(scheme, doc, where)
        if scheme.check is not None:
            scheme.check(dict(out), None, n, channels)
    except ProvenanceError:
        raise
    except PMarkValueError as exc:
        msg = str(exc)
        raise ProvenanceError(msg if msg.startswith(where) else f"{where} is invalid: {msg}") from None
    return out


def _steps(doc: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(doc, list) or len(doc) > _MAX_STEPS:
        raise ProvenanceError(f"{where}: field 'steps' must be a list of at most {_MAX_STEPS} objects")
    steps = []
    for t, item in enumerate(doc):
        f = _Fields(item, _STEP_FIELDS, f"{where}: steps[{t}]")
        if f.integer("position", 0, _MAX_STEPS) != t:
            raise f._bad("position", f"{t} (positions in order from 0)")
        fallback = item["fallback"]
        if not isinstance(fallback, bool):
            raise f._bad("fallback", "true or false")
        steps.append(
            {
                "position": t,
                "text": f.string("text", max_len=PROVENANCE_LIMIT_BYTES, printable=False, empty=True),
                "n_candidates_sampled": f.integer("n_candidates_sampled", 0, MAX_CANDIDATES * MAX_TRIALS),
                "tokens": f.integer("tokens", 0, MAX_SENTENCE_TOKENS),
                "outcome": f.choice("outcome", _OUTCOMES),
                "trials": f.integer("trials", 1, MAX_TRIALS),
                "fallback": fallback,
            }
        )
    return steps


def _attacks(doc: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(doc, list) or not 1 <= len(doc) <= _MAX_ATTACKS:
        raise ProvenanceError(f"{where}: field 'attacks' must be a list of 1 to {_MAX_ATTACKS} objects")
    out = []
    for i, item in enumerate(doc):
        f = _Fields(item, _ATTACK_FIELDS, f"{where}: attacks[{i}]")
        out.append(
            {
                "name": f.string("name"),
                "params": f.string("params", max_len=PROVENANCE_LIMIT_BYTES, printable=False, empty=True),
                "seed": f.integer("seed", 0, _MAX_SEED),
            }
        )
    return out


def _digest(f: Any) -> str:
    digest = f.string("text_sha256", max_len=64)
    if len(digest) != 64 or not set(digest) <= set("0123456789abcdef"):
        raise f._bad("text_sha256", "64 lowercase hexadecimal digits")
    return digest


def parse_provenance(raw: bytes, name: str) -> dict[str, Any]:
    """The validated fields of a provenance document (``steps`` as a list of dicts; no ``format``, ``note``).

    Args:
      raw: the file's bytes (read with a bound by the caller).
      name: the file's name, for messages.

    Returns:
      ``mode``, ``n_candidates``, ``channels``, ``seed``, ``prompt``, ``key_fingerprint``, ``encoder``,
      ``model``, ``sampling``, ``settings``, ``aligned``, ``steps``, ``attacks`` (``()`` when the optional field
      is absent), ``text_sha256`` (``None`` when absent), ``toolkit_version``.

    Raises:
      ProvenanceError: see the module docstring (e.g. online ``N % 2**b != 0``).
    """
    where = f"provenance file {name}"
    doc = _parse(raw, name)
    optional = tuple(name for name in OPTIONAL_FIELDS if name in doc)
    f = _Fields(doc, FIELDS + optional, where)
    scheme = _scheme(f, where)
    n = f.integer("n_candidates", *LIMITS["n_candidates"])
    no_channels = f.doc["channels"] is None and not scheme.channels  # a scheme without key channels: null
    channels = None if no_channels else f.integer("channels", *LIMITS["channels"])
    fingerprint = f.string("key_fingerprint", max_len=16)
    if len(fingerprint) != 16 or not set(fingerprint) <= set("0123456789abcdef"):
        raise f._bad("key_fingerprint", "16 lowercase hexadecimal digits")
    aligned = f.doc["aligned"]
    if aligned is not None and not isinstance(aligned, bool):
        raise f._bad("aligned", "true, false or null")
    f.string("note", printable=False, empty=True)
    return {
        "mode": scheme.name,
        "n_candidates": n,
        "channels": channels,
        "seed": f.integer("seed", 0, _MAX_SEED),
        "prompt": f.string("prompt", max_len=PROVENANCE_LIMIT_BYTES, printable=False, empty=True),
        "key_fingerprint": fingerprint,
        "encoder": f.string("encoder"),
        "model": None if f.doc["model"] is None else f.string("model"),
        "sampling": _sampling(f.doc["sampling"], f"{where}: field 'sampling'"),
        "settings": _settings(f.doc["settings"], scheme, n, channels, f"{where}: field 'settings'"),
        "aligned": aligned,
        "steps": _steps(f.doc["steps"], where),
        "attacks": tuple(_attacks(doc["attacks"], where)) if "attacks" in doc else (),
        "text_sha256": _digest(f) if "text_sha256" in doc else None,
        "toolkit_version": f.string("toolkit_version", max_len=100),
    }
