"""What ``pmark audit`` can audit: the target protocol, its loader, and every call to it guarded (issue 27).

A **target** is any object with

* ``generate(prompt, key, seed, sentences) -> str`` — a watermarked continuation of ``prompt`` with ``sentences``
  sentences (a ``generate(prompt, key, seed)`` without ``sentences`` is accepted: the audit then uses the text it
  gets, and its first sentence for distortion);
* ``detect(text, key) -> float`` — a p-value in ``[0, 1]`` (small = watermarked) or, with ``output = "score"``, a
  score (large = watermarked; the audit calibrates its threshold on held-out human text);

and optionally

* ``keygen(seed) -> key`` or ``keygen(seed, calibration) -> key`` — a key from an integer seed (default: a
  :class:`pmark_impl.WatermarkKey` derived from the seed for the audit's encoder); a target whose ``keygen`` takes
  ``calibration`` receives texts (lists of sentences) to calibrate the key on, and the audit measures its FPR on
  other texts of the same source;
* ``claims`` — the guarantees the target claims (:data:`CLAIMS`; default ``("fpr", "reproducible")``), which
  decide the exit status;
* ``law(prompt, key, texts, probs) -> probs`` — the exact law of its first sentence under ``key`` when the LM's
  next sentence has the finite law ``(texts, probs)`` (needed for the claim ``"exact-law"``);
* ``key_directions(key) -> [m, d]`` — the secret directions of the key (pivots, LSH normals), so that key leakage
  is scored as recovered-direction similarity.

A target is made by a **factory** ``factory(env) -> target`` (:class:`pmark_impl.audit.AuditEnv`: the LM sampler,
encoder and prompts the audit provides), named ``module:attribute`` and registered as a plug-in of kind
``audit_target`` (``@plugin("audit_target")`` or an entry point of ``pmark.audit_targets``), or a built-in or
plugged-in :class:`~pmark_impl.schemes.Scheme` (:func:`pmark_impl.audit.scheme_target`).

Every call goes through :class:`Target`: it runs in a worker thread with a time limit, and a call that raises,
hangs, or returns the wrong type, NaN or a p-value outside ``[0, 1]`` stops the audit with one line naming the target
and the call (:class:`TargetError`). A hung call's thread cannot be killed; it is left behind as a daemon.
"""

from __future__ import annotations

import inspect
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pmark_theory._validate import PMarkValueError

__all__ = [
    "CLAIMS",
    "DEFAULT_CLAIMS",
    "DEFAULT_TIMEOUT",
    "OUTPUTS",
    "Target",
    "TargetError",
    "load_target",
    "resolve_target",
]

#: Guarantees a target can claim (see docs/audit.md): the audit fails (exit 1) when a claimed one is violated.
CLAIMS = ("distortion-free", "exact-law", "fpr", "fpr-per-key", "reproducible")
#: What a target claims when it declares nothing.
DEFAULT_CLAIMS = ("fpr", "reproducible")
#: What ``detect`` returns.
OUTPUTS = ("p-value", "score")
#: Seconds one call to the target may take.
DEFAULT_TIMEOUT = 60.0


class TargetError(PMarkValueError):
    """The target broke its protocol: one line naming the target and the call."""


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


class Target:
    """A target behind the protocol's guards (module docstring). Built by :func:`load_target`.

    Attributes:
      name: how the target was named (``module:attribute`` or the scheme's name).
      output: ``"p-value"`` or ``"score"``.
      claims: the claimed guarantees.
      calibrates: ``keygen`` takes ``calibration``.
      timeout: seconds per call.
    """

    def __init__(self, obj: Any, name: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.name = name
        self.timeout = float(timeout)
        self._obj = obj
        for method in ("generate", "detect"):
            if not callable(getattr(obj, method, None)):
                raise TargetError(
                    f"audit target {name}: has no callable {method}() (the protocol needs generate and detect)"
                )
        output = getattr(obj, "output", "p-value")
        if output not in OUTPUTS:
            raise TargetError(
                f"audit target {name}: output must be one of {', '.join(OUTPUTS)}, got {_short(output)}"
            )
        self.output: str = output
        claims = getattr(obj, "claims", DEFAULT_CLAIMS)
        if isinstance(claims, str) or not isinstance(claims, (Sequence, set, frozenset)):
            raise TargetError(f"audit target {name}: claims must be a list of names, got {_short(claims)}")
        unknown = [c for c in claims if c not in CLAIMS]
        if unknown:
            raise TargetError(
                f"audit target {name}: unknown claim {_short(unknown[0])} (known: {', '.join(CLAIMS)})"
            )
        if "exact-law" in claims and not callable(getattr(obj, "law", None)):
            raise TargetError(f"audit target {name}: claims exact-law but has no callable law()")
        if output == "score" and "fpr-per-key" in claims:
            raise TargetError(
                f"audit target {name}: a score detector cannot claim fpr-per-key (it has no p-value)"
            )
        self.claims: tuple[str, ...] = tuple(c for c in CLAIMS if c in claims)
        keygen = getattr(obj, "keygen", None)
        self._keygen = keygen if callable(keygen) else None
        self.calibrates = self._keygen is not None and _accepts(self._keygen, "calibration")
        self._sentences = _accepts(obj.generate, "sentences")
        self.has_law = callable(getattr(obj, "law", None))
        options = getattr(obj, "audit_options", None)
        self.options: dict[str, Any] = dict(options) if isinstance(options, dict) else {}
        self.has_directions = callable(getattr(obj, "key_directions", None))

    # -- the guard -------------------------------------------------------------------------------------------------
    def _call(self, call: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["value"] = fn(*args, **kwargs)
            except BaseException as exc:
                box["error"] = exc

        worker = threading.Thread(target=run, name=f"audit:{call}", daemon=True)
        worker.start()
        worker.join(self.timeout)
        if worker.is_alive():
            raise TargetError(f"audit target {self.name}: {call} did not return within {self.timeout:g} s")
        if "error" in box:
            exc = box["error"]
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise TargetError(
                f"audit target {self.name}: {call} raised {type(exc).__name__}"
                + (f": {first[:200]}" if first else "")
            ) from exc
        return box["value"]

    # -- the protocol ----------------------------------------------------------------------------------------------
    def keygen(
        self, seed: int, calibration: Sequence[Sequence[str]] | None = None, *, encoder: Any = None
    ) -> Any:
        """The key of ``seed`` (the target's ``keygen``, or a :class:`pmark_impl.WatermarkKey` for ``encoder``)."""
        call = f"keygen(seed={seed})"
        if self._keygen is None:
            from pmark_impl.keys._keys import WatermarkKey

            return WatermarkKey.generate(np.random.default_rng(seed), encoder.name, encoder.dim)
        if self.calibrates:
            texts = None if calibration is None else [list(t) for t in calibration]
            key = self._call(call, self._keygen, seed, calibration=texts)
        else:
            key = self._call(call, self._keygen, seed)
        if key is None:
            raise TargetError(f"audit target {self.name}: {call} returned None")
        return key

    def generate(self, prompt: str, key: Any, seed: int, sentences: int) -> str:
        """The watermarked text (checked: a ``str``)."""
        call = f"generate(prompt={_short(prompt, 30)}, seed={seed})"
        if self._sentences:
            text = self._call(call, self._obj.generate, prompt, key, seed, sentences=sentences)
        else:
            text = self._call(call, self._obj.generate, prompt, key, seed)
        if not isinstance(text, str):
            raise TargetError(f"audit target {self.name}: {call} returned {type(text).__name__}, not str")
        return text

    def detect(self, text: str, key: Any) -> float:
        """The p-value or score (checked: a finite real; a p-value within ``[0, 1]``)."""
        call = f"detect(text={_short(text, 30)})"
        value = self._call(call, self._obj.detect, text, key)
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TargetError(
                f"audit target {self.name}: {call} returned {type(value).__name__}, not a number"
                + (" (return result.p_value)" if hasattr(value, "p_value") else "")
            )
        value = float(value)
        if math.isnan(value):
            raise TargetError(f"audit target {self.name}: {call} returned NaN")
        if self.output == "p-value" and not 0.0 <= value <= 1.0:
            raise TargetError(f"audit target {self.name}: {call} returned p-value {value!r} outside [0, 1]")
        if self.output == "score" and not math.isfinite(value):
            raise TargetError(f"audit target {self.name}: {call} returned a non-finite score {value!r}")
        return value

    def law(self, prompt: str, key: Any, texts: list[str], probs: np.ndarray) -> np.ndarray:
        """The target's exact first-sentence law under ``key`` (checked: a law on ``texts``)."""
        call = "law()"
        out = np.asarray(
            self._call(call, self._obj.law, prompt, key, list(texts), probs.copy()), dtype=np.float64
        )
        if out.shape != probs.shape or not np.all(np.isfinite(out)) or np.any(out < -1e-12):
            raise TargetError(
                f"audit target {self.name}: {call} must return {probs.size} non-negative probabilities"
            )
        if abs(out.sum() - 1.0) > 1e-6:
            raise TargetError(
                f"audit target {self.name}: {call} returned probabilities summing to {out.sum():.6g}"
            )
        return np.clip(out, 0.0, None)

    def key_directions(self, key: Any, dim: int) -> np.ndarray | None:
        """The key's secret directions ``[m, dim]`` (or ``None`` when the target does not say)."""
        if not self.has_directions:
            return None
        out = np.asarray(self._call("key_directions()", self._obj.key_directions, key), dtype=np.float64)
        if out.ndim != 2 or out.shape[1] != dim or not np.all(np.isfinite(out)):
            raise TargetError(
                f"audit target {self.name}: key_directions() must return a finite [m, {dim}] array (the encoder's "
                f"dimension), got shape {out.shape}"
            )
        return out


def load_target(spec: Any, env: Any, *, timeout: float = DEFAULT_TIMEOUT, **scheme_options: Any) -> Target:
    """The target named ``spec``: a scheme (name, ``module:attribute`` or object) or an audit-target factory.

    Args:
      spec: a built-in scheme's name, a :class:`~pmark_impl.schemes.Scheme`, or ``module:attribute`` / an entry
        point naming a registered audit-target factory or scheme plug-in.
      env: the :class:`pmark_impl.audit.AuditEnv` the factory is called with.
      timeout: seconds per call.
      **scheme_options: for a scheme: :func:`pmark_impl.audit.scheme_target`'s options.

    Raises:
      TargetError: nothing registered under ``spec``, or the object breaks the protocol (one line).
    """
    from pmark_impl.audit._scheme_target import scheme_target
    from pmark_impl.schemes import Scheme
    from pmark_theory._plugins import is_plugin

    if isinstance(spec, Target):
        return spec
    if isinstance(spec, Scheme):
        return Target(scheme_target(spec, env, **scheme_options), spec.name, timeout)
    registered = not isinstance(spec, str) and is_plugin(spec, "audit_target")
    if registered:  # a registered factory, passed as an object
        name = f"{getattr(spec, '__module__', '?')}:{getattr(spec, '__qualname__', '?')}"
        return _from_factory(spec, name, env, timeout, scheme_options)
    if not isinstance(spec, str) and callable(getattr(spec, "generate", None)):  # a target object, in Python
        return Target(spec, type(spec).__name__, timeout)
    kind, obj = resolve_target(spec)
    if kind == "scheme":
        return Target(scheme_target(obj, env, **scheme_options), obj.name, timeout)
    return _from_factory(obj, spec, env, timeout, scheme_options)


def resolve_target(spec: Any) -> tuple[str, Any]:
    """``("scheme", Scheme)`` or ``("factory", factory)`` named by the string ``spec``; nothing is called.

    ``pmark audit`` calls it before it builds any model, so that a target that does not exist or is not registered
    is refused first (one line).

    Raises:
      TargetError: an empty or non-string spec, an unregistered or missing plug-in, an unknown scheme.
    """
    from pmark_impl.schemes import get_scheme
    from pmark_theory._plugins import PluginError, load_plugin, plugin_entry_points

    if not isinstance(spec, str) or not spec:
        raise TargetError(f"audit target must be a scheme name or module:attribute, got {_short(spec)}")
    if ":" in spec or spec in plugin_entry_points("audit_target"):
        try:
            return "factory", load_plugin(spec, "audit_target")
        except PluginError as exc:
            try:  # a scheme plug-in named module:attribute is a target too
                return "scheme", get_scheme(spec)
            except PMarkValueError:
                raise TargetError(str(exc)) from None
    try:
        return "scheme", get_scheme(spec)
    except PMarkValueError as exc:
        raise TargetError(f"audit target {spec!r}: {exc}") from None


def _from_factory(
    factory: Any, name: str, env: Any, timeout: float, scheme_options: dict[str, Any]
) -> Target:
    """Call a registered factory (guarded) and wrap what it returns."""
    if scheme_options:
        raise TargetError(
            f"audit target {name}: scheme options ({', '.join(scheme_options)}) apply to schemes only"
        )
    if not callable(factory):
        raise TargetError(f"audit target {name}: is not callable (a factory(env) -> target)")
    probe = Target.__new__(Target)
    probe.name, probe.timeout = name, float(timeout)
    obj = probe._call("factory(env)", factory, env)
    return Target(obj, name, timeout)
