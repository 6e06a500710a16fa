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
hangs, or returns the wrong type, NaN, a p-value outside ``[0, 1]`` or more than the output limits allow
(:data:`MAX_TEXT_CHARS` characters of text, :data:`MAX_DIRECTIONS` key directions, :data:`MAX_CLAIMS` claims)
stops the audit with one line naming the target and the call (:class:`TargetError`). What a call returns is
checked and converted in the same worker thread, under the same time limit, so that no return value can make the
audit hang after the call (a 10 MB text is refused at once). A hung call's thread cannot be killed; it is left
behind as a daemon (the audit runs in a child process that ends with it: :mod:`pmark_impl.audit._isolate`).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pmark_impl.audit._config import MAX_TIMEOUT
from pmark_impl.audit._guard import (
    MAX_DIRECTIONS,
    MAX_TEXT_CHARS,
    TargetError,
    checked_array,
    checked_number,
    checked_text,
    guarded_call,
)
from pmark_impl.audit._guard import short as _short
from pmark_theory._validate import PMarkValueError

__all__ = [
    "CLAIMS",
    "DEFAULT_CLAIMS",
    "DEFAULT_TIMEOUT",
    "MAX_CLAIMS",
    "MAX_DIRECTIONS",
    "MAX_OPTIONS_CHARS",
    "MAX_TEXT_CHARS",
    "MAX_TIMEOUT",
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
#: Seconds one call to the target may take (``--timeout``; at most :data:`MAX_TIMEOUT`, a day).
DEFAULT_TIMEOUT = 60.0
#: Most entries of ``claims`` and of ``audit_options``, and the largest ``audit_options`` (characters of JSON).
MAX_CLAIMS = 64
MAX_OPTIONS_CHARS = 65_536


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
      origin: what the target was made from (its factory, its scheme, or the object itself): the code
        :mod:`pmark_impl.audit._code` fingerprints.
    """

    def __init__(self, obj: Any, name: str, timeout: float = DEFAULT_TIMEOUT, origin: Any = None) -> None:
        self.name = name
        self.timeout = float(timeout)
        self.origin = obj if origin is None else origin
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
        if len(claims) > MAX_CLAIMS:
            raise TargetError(
                f"audit target {name}: claims holds {len(claims)} entries (at most {MAX_CLAIMS})"
            )
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
        if len(self.options) > MAX_CLAIMS or len(_options_json(self.options)) > MAX_OPTIONS_CHARS:
            raise TargetError(
                f"audit target {name}: audit_options is too large (at most {MAX_CLAIMS} entries and "
                f"{MAX_OPTIONS_CHARS} characters of JSON)"
            )
        self.has_directions = callable(getattr(obj, "key_directions", None))

    def _call(self, call: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return guarded_call(self.name, self.timeout, call, fn, *args, **kwargs)

    # -- the protocol ----------------------------------------------------------------------------------------------
    def keygen(
        self, seed: int, calibration: Sequence[Sequence[str]] | None = None, *, encoder: Any = None
    ) -> Any:
        """The key of ``seed`` (the target's ``keygen``, or a :class:`pmark_impl.WatermarkKey` for ``encoder``)."""
        call = f"keygen(seed={seed})"
        if self._keygen is None:
            from pmark_impl.keys import WatermarkKey

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
        kwargs = {"sentences": sentences} if self._sentences else {}
        check = lambda text: checked_text(self.name, call, text)  # noqa: E731
        return self._call(call, self._obj.generate, prompt, key, seed, check=check, **kwargs)

    def detect(self, text: str, key: Any) -> float:
        """The p-value or score (checked: a finite real; a p-value within ``[0, 1]``)."""
        call = f"detect(text={_short(text, 30)})"
        check = lambda v: checked_number(self.name, call, v, self.output)  # noqa: E731
        return self._call(call, self._obj.detect, text, key, check=check)

    def law(self, prompt: str, key: Any, texts: list[str], probs: np.ndarray) -> np.ndarray:
        """The target's exact first-sentence law under ``key`` (checked: a law on ``texts``)."""
        call = "law()"
        wrong = f"audit target {self.name}: {call} must return {probs.size} non-negative probabilities"

        def check(value: Any) -> np.ndarray:
            out = checked_array(value, probs.size, wrong)
            if out.shape != probs.shape or np.any(out < -1e-12):
                raise TargetError(wrong)
            if abs(out.sum() - 1.0) > 1e-6:
                raise TargetError(
                    f"audit target {self.name}: {call} returned probabilities summing to {out.sum():.6g}"
                )
            return np.clip(out, 0.0, None)

        return self._call(call, self._obj.law, prompt, key, list(texts), probs.copy(), check=check)

    def key_directions(self, key: Any, dim: int) -> np.ndarray | None:
        """The key's secret directions ``[m, dim]`` (or ``None`` when the target does not say)."""
        if not self.has_directions:
            return None
        wrong = (
            f"audit target {self.name}: key_directions() must return a finite [m, {dim}] array (the encoder's "
            f"dimension, m <= {MAX_DIRECTIONS})"
        )

        def check(value: Any) -> np.ndarray:
            out = checked_array(value, MAX_DIRECTIONS, wrong)
            if out.ndim != 2 or out.shape[1] != dim:
                raise TargetError(f"{wrong}, got shape {out.shape}")
            return out

        return self._call("key_directions()", self._obj.key_directions, key, check=check)


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
      PMarkValueError: a bad ``env``, ``timeout`` or option (named), before anything is loaded.
    """
    from pmark_impl.audit._checks import check_env, check_options
    from pmark_impl.audit._scheme_target import scheme_target
    from pmark_impl.schemes import Scheme
    from pmark_theory.infra.plugins import is_plugin

    if isinstance(spec, Target):
        return spec
    check_env(env)
    check_options({"timeout": timeout, **scheme_options})
    if isinstance(spec, Scheme):
        return Target(scheme_target(spec, env, **scheme_options), spec.name, timeout, origin=spec)
    registered = not isinstance(spec, str) and is_plugin(spec, "audit_target")
    if registered:  # a registered factory, passed as an object
        name = f"{getattr(spec, '__module__', '?')}:{getattr(spec, '__qualname__', '?')}"
        return _from_factory(spec, name, env, timeout, scheme_options)
    if not isinstance(spec, str) and callable(getattr(spec, "generate", None)):  # a target object, in Python
        return Target(spec, type(spec).__name__, timeout)
    kind, obj = resolve_target(spec)
    if kind == "scheme":
        return Target(scheme_target(obj, env, **scheme_options), obj.name, timeout, origin=obj)
    return _from_factory(obj, spec, env, timeout, scheme_options)


def resolve_target(spec: Any) -> tuple[str, Any]:
    """``("scheme", Scheme)`` or ``("factory", factory)`` named by the string ``spec``; nothing is called.

    ``pmark audit`` calls it before it builds any model, so that a target that does not exist or is not registered
    is refused first (one line).

    Raises:
      TargetError: an empty or non-string spec, an unregistered or missing plug-in, an unknown scheme.
    """
    from pmark_impl.schemes import get_scheme
    from pmark_theory.infra.plugins import PluginError, load_plugin, plugin_entry_points

    if not isinstance(spec, str) or not spec:
        raise TargetError(f"audit target must be a scheme name or module:attribute, got {_short(spec)}")
    if ":" in spec or spec in plugin_entry_points("audit_target"):
        try:
            return "factory", load_plugin(spec, "audit_target")
        except SystemExit as exc:  # the module's top-level code: never an exit status of pmark's
            raise TargetError(
                f"audit target {spec}: importing it raised SystemExit({exc.code!r}), which would end the audit "
                "without a report"
            ) from None
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
    # the object is checked (its claims and options read) in the guarded thread too: a property that hangs or
    # returns a huge value is stopped by the time limit
    return guarded_call(
        name,
        float(timeout),
        "factory(env)",
        factory,
        env,
        check=lambda obj: Target(obj, name, timeout, origin=factory),
    )


def _options_json(options: dict[str, Any]) -> str:
    return json.dumps(options, sort_keys=True, default=repr)
