"""Any :class:`~pmark_impl.schemes.Scheme` as an audit target: the toolkit's own generate and detect, unchanged.

What a scheme claims follows from its parts, never from its name: ``scheme.claims`` (e.g. online PMark's
``"distortion-free"``, C10), ``"exact-law"`` when it declares ``scheme.law``, ``"fpr"`` (its null holds averaged over
keys: K1) and ``"reproducible"``; with ``calibrated=True`` the key is calibrated on the audit's calibration texts
through the scheme's :class:`~pmark_impl.schemes.SchemeCalibration` (``fit_key``) and the target also claims
``"fpr-per-key"``. A scheme whose detector needs a calibration (``stored_in == "detector"``, SimMark's gamma) fits
it on the calibration texts, or on the built-in corpus when the audit gives none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pmark_impl.schemes import pmark_key
from pmark_theory._validate import PMarkValueError

__all__ = ["SchemeTarget", "scheme_target"]

#: The level detection runs at: the audit reads the p-value, never the verdict, and below ``min_sentences`` or when
#: the smallest attainable p-value exceeds ``alpha`` a result's p-value is replaced by 1; at 0.999 it never is for a
#: text the detector can score (a conservative 1 would hide the detector's real null law).
_READ_ALPHA = 0.999


def _documents(texts: Sequence[Sequence[str]], label: str) -> list[Any]:
    from pmark_impl._corpus import Document

    return [Document(f"{label}-{i}", tuple(t)) for i, t in enumerate(texts)]


class SchemeTarget:
    """A scheme behind the audit protocol (module docstring)."""

    def __init__(
        self,
        scheme: Any,
        env: Any,
        *,
        n_candidates: int | None = None,
        channels: int = 4,
        calibrated: bool = False,
        settings: dict[str, Any] | None = None,
    ) -> None:
        self.scheme = scheme
        self.env = env
        self.n_candidates = scheme.default_n if n_candidates is None else int(n_candidates)
        self.channels = int(channels)
        self.settings = dict(settings or {})
        self.calibrated = bool(calibrated)
        cal = scheme.calibration
        if calibrated and (cal is None or cal.stored_in != "key" or getattr(cal, "fit_key", None) is None):
            raise PMarkValueError(
                f"scheme {scheme.name!r} declares no key calibration: audit it with calibrated=False"
            )
        self._detector_cal = None
        self._prompts: dict[str, str] = {}
        claims = ["fpr", "reproducible", *getattr(scheme, "claims", ())]
        if scheme.law is not None:
            claims.append("exact-law")
        else:
            self.law = None  # type: ignore[method-assign]  # the protocol: no law declared
        if not scheme.channels:
            self.key_directions = None  # type: ignore[method-assign]  # no secret directions to score
        if calibrated:
            claims.append("fpr-per-key")
        self.claims = tuple(claims)
        self.audit_options = {  # what the audit's resume fingerprint must tell apart
            "scheme": scheme.name,
            "n_candidates": self.n_candidates,
            "channels": self.channels,
            "calibrated": self.calibrated,
            "settings": self.settings,
        }
        if not calibrated and (cal is None or cal.stored_in != "detector"):
            self.keygen = self._plain_keygen  # type: ignore[method-assign]  # no calibration texts wanted

    def _plain_keygen(self, seed: int) -> Any:
        return SchemeTarget.keygen(self, seed)

    # -- protocol ----------------------------------------------------------------------------------------------
    def keygen(self, seed: int, calibration: Sequence[Sequence[str]] | None = None) -> Any:
        from pmark_impl.keys import WatermarkKey

        enc = self.env.encoder
        key = WatermarkKey.generate(np.random.default_rng(seed), enc.name, enc.dim, max(self.channels, 1))
        cal = self.scheme.calibration
        if cal is None or calibration is None:
            return key
        docs = _documents(calibration, f"calibration-{seed}")
        if cal.stored_in == "detector":
            self._detector_cal = cal.fit(enc, docs, self._resolved(key))
            return key
        if self.calibrated:
            t_len = min(len(t) for t in calibration)
            key, _ = cal.fit_key(key, enc, docs, self._resolved(key), text_sentences=t_len, corpus="audit")
        return key

    def _resolved(self, key: Any) -> dict[str, Any]:
        from pmark_impl.schemes import resolve_settings

        return dict(resolve_settings(self.scheme, self.settings, key=key))

    def generate(self, prompt: str, key: Any, seed: int, sentences: int) -> str:
        from pmark_impl.generation import generate

        result = generate(
            key,
            self.env.sampler,
            self.env.encoder,
            prompt,
            scheme=self.scheme,
            n_candidates=self.n_candidates,
            max_sentences=sentences,
            seed=seed,
            **self._channel_kw(),
            **self.settings,
        )
        # The prompt of the LAST generated text and its sentence prefixes (the power part detects them right after
        # generating): an online detector resamples candidates from it. Any other text is detected with prompt "",
        # whatever was generated before, so a resumed audit detects exactly as an uninterrupted one.
        kept = [step.text for step in result.steps if step.text]
        self._prompts = {" ".join(kept[:j]): prompt for j in range(1, len(kept) + 1)}
        self._prompts[result.text] = prompt
        return result.text

    def _channel_kw(self) -> dict[str, Any]:
        return {"channels": self.channels} if self.scheme.channels else {}

    def _detector_calibration(self) -> Any:
        cal = self.scheme.calibration
        if cal is None or cal.stored_in != "detector":
            return None
        if self._detector_cal is None:  # no calibration texts given: the built-in corpus
            from pmark_impl._corpus import builtin_documents

            self._detector_cal = cal.fit(self.env.encoder, builtin_documents(), self._resolved(None))
        return self._detector_cal

    def detect(self, text: str, key: Any) -> float:
        from pmark_impl.detection import detect

        result = detect(
            key,
            text,
            self.env.encoder,
            scheme=self.scheme,
            sampler=self.env.sampler if self.scheme.detect_needs_lm else None,
            prompt=self._prompts.get(text, ""),
            n_candidates=self.n_candidates,
            min_sentences=1,
            alpha=_READ_ALPHA,
            calibration=self._detector_calibration(),
            **self._channel_kw(),
            **{k: v for k, v in self.settings.items() if _detects(self.scheme, k)},
        )
        return float(result.p_value)

    def law(self, prompt: str, key: Any, texts: list[str], probs: np.ndarray) -> np.ndarray:
        from pmark_impl.schemes import Setup, resolve_settings

        settings = resolve_settings(
            self.scheme, self.settings, key=key, n_candidates=self.n_candidates, channels=self.channels
        )
        setup = Setup(key, self.env.encoder, prompt, self.n_candidates, self.channels, settings)
        return np.asarray(self.scheme.law(setup, texts, probs), dtype=np.float64)

    def key_directions(self, key: Any) -> np.ndarray:
        return np.asarray(pmark_key.pivots(key)[: self.channels])


def _detects(scheme: Any, name: str) -> bool:
    return any(o.name == name and o.detect for o in scheme.options)


def scheme_target(
    scheme: Any,
    env: Any,
    *,
    n_candidates: int | None = None,
    channels: int = 4,
    calibrated: bool = False,
    settings: dict[str, Any] | None = None,
) -> SchemeTarget:
    """A scheme (name or object) as an audit target.

    Args:
      scheme: a :class:`~pmark_impl.schemes.Scheme` or a name :func:`~pmark_impl.schemes.get_scheme` knows.
      env: the audit's :class:`~pmark_impl.audit.AuditEnv`.
      n_candidates: ``N`` (default: the scheme's).
      channels: ``b`` for schemes with channels.
      calibrated: calibrate every key on the audit's calibration texts (and claim ``"fpr-per-key"``).
      settings: the scheme's own settings (``gamma``, ``lsh_dim``, ...).

    Raises:
      PMarkValueError: a bad argument (named), an unknown scheme.
    """
    from pmark_impl.audit._checks import check_env, check_options
    from pmark_impl.schemes import Scheme, get_scheme

    check_env(env)
    check_options(
        {"n_candidates": n_candidates, "channels": channels, "calibrated": calibrated, "settings": settings}
    )
    if isinstance(scheme, str):
        scheme = get_scheme(scheme)
    elif not isinstance(scheme, Scheme):
        raise PMarkValueError(f"scheme must be a Scheme or a scheme's name, got {type(scheme).__name__}")
    return SchemeTarget(
        scheme, env, n_candidates=n_candidates, channels=channels, calibrated=calibrated, settings=settings
    )
