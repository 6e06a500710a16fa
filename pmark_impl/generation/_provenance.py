"""Provenance of a generated text: how it was made, so that detection follows generation.

``pmark generate --out text.txt`` writes, beside the text, ``text.txt.pmark.json`` (or ``--provenance FILE``):
a JSON document with the format version, the mode, ``N``, ``b``, the seed, the sampler's settings (temperature,
top-p, top-k, token cap), the model and encoder ids, the prompt, the key's public fingerprint, the toolkit's
version, the mode's own settings (offline batch, SemStamp ``lsh_dim`` / ``n_clusters`` / ``gamma`` /
``max_trials``; SimMark ``simmark_low`` / ``simmark_high`` / ``max_trials``, E20) and one record per sentence position: the sentence, the candidates sampled, the tokens of the
chosen candidate, how it ended (``sentence`` / ``eos`` / ``cap``), SemStamp's trials and fallback; and, when the command
line wrote the text to a file, the text's SHA-256 (``text_sha256``), by which ``--force`` recognises the text as
pmark's own (:mod:`pmark_impl.cli.owned_files`).
:meth:`pmark_impl.generation._types.GenerationResult.provenance` returns the same record in Python.

``pmark detect text.txt`` reads ``text.txt.pmark.json`` when it exists (or ``--provenance FILE``) and detects
with the generation's mode, channels, prompt, ``N``, model, sampler settings and SemStamp settings; a flag that
contradicts the record is an error, never silently obeyed — a text generated online is never detected offline
by a forgotten default. A record written for another key (fingerprint mismatch) is an error too.

**What is left out, and why** (docs/security.md, check S1). The record never holds the secret, the proxies
``f = <v_j, T(s)>``, the key bits ``r_(t, j)``, the match counts ``h_r`` or the selection sets: with the public
encoder they would let a reader solve for the key. Two per-sentence fields still carry a little key
information, and the record is therefore for the key holder, like ``pmark detect --evidence`` (keep it with
the key, do not publish it with the text): in offline mode ``n_candidates_sampled < N`` means that the sentence
matched every key bit (early stop at a perfect match), and a SemStamp ``fallback`` marks a sentence that is
probably not green. The file is written atomically with the default permissions (``0666`` minus the umask).

Reading is bounded (:mod:`pmark_theory.infra.files`: regular files only, at most ``PROVENANCE_LIMIT_BYTES``),
strict UTF-8 JSON without ``NaN``/``Infinity``, and the schema is checked field by field
(:mod:`pmark_impl.generation._provenance_schema`: unknown or missing fields, wrong types, out-of-range numbers, nesting are
errors): every refusal is one :class:`ProvenanceError` line. The command line's use of the record (flags that
contradict it are errors) is :mod:`pmark_impl.cli.provenance`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pmark_impl.generation._provenance_schema import (
    PROVENANCE_FORMAT,
    PROVENANCE_LIMIT_BYTES,
    PROVENANCE_VERSION,
    ProvenanceError,
    parse_provenance,
)
from pmark_theory.infra.files import read_bounded, write_atomic

if TYPE_CHECKING:  # pragma: no cover
    from pmark_impl.generation._types import GenerationResult

__all__ = [
    "PROVENANCE_FORMAT",
    "PROVENANCE_LIMIT_BYTES",
    "PROVENANCE_NOTE",
    "PROVENANCE_SUFFIX",
    "PROVENANCE_VERSION",
    "Provenance",
    "ProvenanceError",
    "ProvenanceStep",
    "load_provenance",
    "provenance_bytes",
    "provenance_path",
    "save_provenance",
]

#: ``pmark generate --out FILE`` writes the record to ``FILE + PROVENANCE_SUFFIX``.
PROVENANCE_SUFFIX = ".pmark.json"
#: Written into every record.
PROVENANCE_NOTE = (
    "no secret, proxies, key bits, match counts or selection sets (they would reveal the key, docs/security.md); "
    "offline early stops and SemStamp fallbacks still hint at per-sentence evidence: keep this file with the key"
)


def _toolkit_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pmark-toolkit")
    except PackageNotFoundError:
        return "unknown"


@dataclass(frozen=True)
class ProvenanceStep:
    """One sentence position of the record (no proxies, bits or match counts).

    Attributes:
      position: ``t``.
      text: the sentence kept.
      n_candidates_sampled: candidates drawn at this position.
      tokens: tokens of the chosen candidate.
      outcome: ``"sentence"``, ``"eos"`` or ``"cap"``.
      trials: SemStamp batches drawn (1 otherwise).
      fallback: SemStamp uniform fallback used.
    """

    position: int
    text: str
    n_candidates_sampled: int
    tokens: int
    outcome: str
    trials: int = 1
    fallback: bool = False


@dataclass(frozen=True)
class Provenance:
    """How a text was generated (see the module docstring for the fields and what is left out).

    Attributes:
      mode, n_candidates, seed, prompt: as :func:`pmark_impl.generation._watermark.generate`.
      channels: the key channels ``b`` the generation used, or ``None`` for a scheme that uses none
        (``Scheme.channels`` false: SemStamp, SimMark, a plug-in that declares none). A record written before
        issue 37 holds the key's ``b`` for such a scheme too, and is read as it is.
      key_fingerprint: the key's public fingerprint (never the secret).
      encoder: the encoder's id; model: the LM's id (``None`` if unknown).
      sampling: ``temperature``, ``top_p``, ``top_k``, ``max_sentence_tokens`` (empty for a sampler without
        a ``SamplingConfig``).
      settings: the mode's own settings (offline: ``offline_batch``; SemStamp: ``lsh_dim`` or ``n_clusters``,
        ``gamma``, ``max_trials``, ``green_seeding``; a record without ``green_seeding`` means ``"position"``).
      aligned: ``GenerationResult.aligned``.
      steps: one :class:`ProvenanceStep` per position (empty in the record of an attacked text: its sentences
        are no longer the generated ones).
      toolkit_version: the ``pmark-toolkit`` version that generated the text.
      attacks: the text attacks applied after generation, in order (``pmark attack`` appends
        ``{"name", "params" (JSON text), "seed"}``); the detection settings stay the generation's.
      text_sha256: the SHA-256 (hex) of the text file the command line wrote with this record (``None`` from
        the Python API): ``--force`` replaces a text only when its record holds the text's digest.
    """

    mode: str
    n_candidates: int
    channels: int | None
    seed: int
    prompt: str
    key_fingerprint: str
    encoder: str
    model: str | None
    sampling: Mapping[str, Any]
    settings: Mapping[str, Any]
    aligned: bool | None
    steps: tuple[ProvenanceStep, ...]
    toolkit_version: str = "unknown"
    attacks: tuple[Mapping[str, Any], ...] = ()
    text_sha256: str | None = None

    @classmethod
    def from_generation(cls, result: GenerationResult) -> Provenance:
        """The record of ``result`` (``GenerationResult.provenance()``)."""
        steps = tuple(
            ProvenanceStep(
                position=s.position,
                text=s.text,
                n_candidates_sampled=s.n_candidates_sampled,
                tokens=s.tokens,
                outcome=s.outcome,
                trials=s.trials,
                fallback=bool(s.fallback),
            )
            for s in result.steps
        )
        return cls(
            mode=result.mode,
            n_candidates=result.n_candidates,
            channels=_recorded_channels(result.mode, result.channels),
            seed=result.seed,
            prompt=result.prompt,
            key_fingerprint=result.key_fingerprint,
            encoder=result.encoder,
            model=result.model,
            sampling=dict(result.sampling),
            settings=dict(result.settings),
            aligned=result.aligned,
            steps=steps,
            toolkit_version=_toolkit_version(),
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON document (plain Python values, fields in ``pmark_impl.generation._provenance_schema.FIELDS`` order)."""
        doc = {
            "format": PROVENANCE_FORMAT,
            "version": PROVENANCE_VERSION,
            "toolkit_version": self.toolkit_version,
            "mode": self.mode,
            "n_candidates": self.n_candidates,
            "channels": self.channels,
            "seed": self.seed,
            "prompt": self.prompt,
            "key_fingerprint": self.key_fingerprint,
            "encoder": self.encoder,
            "model": self.model,
            "sampling": dict(self.sampling),
            "settings": dict(self.settings),
            "aligned": self.aligned,
            "steps": [asdict(s) for s in self.steps],
            "note": PROVENANCE_NOTE,
        }
        if self.attacks:  # a generated text's record stays byte for byte what it was
            doc["attacks"] = [dict(a) for a in self.attacks]
        if self.text_sha256 is not None:
            doc["text_sha256"] = self.text_sha256
        return doc

    def attacked(self, name: str, params: str, seed: int) -> Provenance:
        """The record of this text after the attack ``name`` (``params``: its parameters as JSON text; ``seed``).

        Detection settings are unchanged (the attacked text is read with the generation's key, mode, prompt and
        channels); the per-sentence steps are dropped, since they describe sentences the attack changed.
        """
        attack = {"name": str(name), "params": str(params), "seed": int(seed)}
        return dataclasses.replace(self, steps=(), attacks=(*self.attacks, attack), text_sha256=None)

    def for_text(self, data: bytes) -> Provenance:
        """This record, naming the text file written beside it by its SHA-256 (``text_sha256``)."""
        return dataclasses.replace(self, text_sha256=hashlib.sha256(data).hexdigest())

    def to_json(self) -> str:
        """:meth:`to_dict` as indented JSON (UTF-8 kept as is), ending with a newline."""
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False, allow_nan=False) + "\n"

    def check_key(self, key: Any, path: str = "") -> None:
        """Refuse a key other than the generation's (the fingerprints differ).

        Raises:
          ProvenanceError: ``key.fingerprint != self.key_fingerprint``.
        """
        if key.fingerprint != self.key_fingerprint:
            raise ProvenanceError(
                f"provenance file {path or '(in memory)'} was written for the key with fingerprint "
                f"{self.key_fingerprint}, not for this key ({key.fingerprint}): use the generation's key"
            )

    def detect_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :func:`pmark_impl.detection._detect.detect` that follow this generation.

        ``mode``, ``prompt``, ``channels``, ``n_candidates`` and the scheme's detection settings (its options with
        ``detect=True``: SemStamp's ``lsh_dim`` or ``n_clusters``, ``gamma`` and ``green_seeding``). Check the key first with :meth:`check_key`; the command line's
        ``pmark_impl.cli.provenance.resolve_detection`` also refuses flags that contradict the record.
        """
        out: dict[str, Any] = {
            "mode": self.mode,
            "prompt": self.prompt,
            "channels": self.channels,
            "n_candidates": self.n_candidates,
        }
        from pmark_impl.schemes import get_scheme

        for opt in get_scheme(self.mode).options:
            if opt.detect and opt.name in self.settings:
                out[opt.name] = self.settings[opt.name]
        return out


def _recorded_channels(mode: str, channels: int) -> int | None:
    """``channels`` for a scheme that uses the key's channels, ``None`` for one that declares none (a scheme not
    found by its name — not registered in this process — keeps ``channels``)."""
    from pmark_impl.schemes import get_scheme
    from pmark_theory import PMarkValueError

    try:
        scheme = get_scheme(mode)
    except PMarkValueError:
        return channels
    return channels if scheme.channels else None


def provenance_path(text_path: str | os.PathLike[str]) -> str:
    """``text_path + ".pmark.json"``: where ``pmark generate --out`` writes the record and ``detect`` looks."""
    return os.fspath(text_path) + PROVENANCE_SUFFIX


def save_provenance(prov: Provenance, path: str | os.PathLike[str], *, force: bool = False) -> Path:
    """Write ``prov`` as JSON, atomically, with mode ``0600``: the record is for the key holder.

    It holds no secret, proxy or key bit, but per-sentence steps leak a little: in offline mode "fewer
    candidates than N" means the sentence matched every key bit, and a SemStamp fallback marks a sentence
    that is probably not green (docs/security.md). Publish the text, not its record.

    The record is first checked by :func:`~pmark_impl.generation._provenance_schema.parse_provenance`, the check
    :func:`load_provenance` applies, so a record that ``pmark detect`` would refuse (e.g. ``N`` beyond
    :data:`pmark_impl._limits.MAX_CANDIDATES` from the Python API) is never written.

    Raises:
      FileExistsError: ``path`` exists and ``force`` is false.
      ProvenanceError: ``prov`` is not a :class:`Provenance` or breaks the schema (the reader's own rules).
      UserFileError: ``path`` is not a regular file or its folder does not exist.
      OSError: the folder is not writable.
    """
    return write_atomic(path, provenance_bytes(prov, path), force=force, mode=0o600, what="provenance file")


def provenance_bytes(prov: Provenance, path: str | os.PathLike[str] = "(in memory)") -> bytes:
    """The file :func:`save_provenance` writes for ``prov``, checked by the reader's own rules first.

    Call it before writing the text a record describes, so that a record that cannot be written never leaves
    its text without one.

    Raises:
      ProvenanceError: ``prov`` is not a :class:`Provenance` or breaks the schema.
    """
    if not isinstance(prov, Provenance):
        raise ProvenanceError(f"prov must be a Provenance, got {type(prov).__name__}")
    raw = prov.to_json().encode("utf-8")
    try:
        parse_provenance(raw, os.fspath(path))
    except ProvenanceError as exc:
        raise ProvenanceError(f"cannot write the provenance record: {exc}") from None
    return raw


def load_provenance(path: str | os.PathLike[str], *, limit: int = PROVENANCE_LIMIT_BYTES) -> Provenance:
    """Read a provenance file written by ``pmark generate`` or :func:`save_provenance`.

    Args:
      path: the file (a regular file; symbolic links are resolved).
      limit: the largest accepted size in bytes (at most ``limit + 1`` bytes are read).

    Returns:
      The :class:`Provenance` (equal to the record that was written).

    Raises:
      ProvenanceError: missing, not a regular file, over ``limit``, not UTF-8, not JSON, ``NaN``, nested
        too deeply, not a ``pmark-provenance`` document, another version, an unknown or missing field, a
        field of the wrong type or out of range (:func:`pmark_impl.generation._provenance_schema.parse_provenance`).
    """
    raw, _ = read_bounded(path, limit=limit, what="provenance file", error=ProvenanceError)
    fields = parse_provenance(raw, os.fspath(path))
    steps = tuple(ProvenanceStep(**step) for step in fields.pop("steps"))
    return Provenance(**fields, steps=steps)
