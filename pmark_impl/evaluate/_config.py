"""What an evaluation runs: schemes, attacks, the (N, b) grid, checked before any generation starts (issue 14).

A run is one scheme configuration (:class:`RunSpec`: scheme, ``N``, ``b``, the scheme's settings and the attacks its
texts go through); an :class:`EvalConfig` is the ordered runs plus what every run shares (sentences per text,
seed, levels). ``none`` is the same LM without a watermark: one candidate per sentence (``offline`` with
``N = 1``, whose single candidate is always output, i.e. the LM's own law); its texts are the unwatermarked-LM
negatives of every other run and the quality baseline. It runs first.

Every check here raises :class:`pmark_theory._validate.PMarkValueError` with one line, so ``pmark evaluate`` exits
2 before a model is loaded: unknown schemes or attacks, bad attack parameters, a grid with ``N % 2**b != 0`` for
online (E6), ``b`` beyond the key.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from pmark_impl._limits import MAX_CANDIDATES, MAX_CHANNELS, check_limit
from pmark_impl.evaluate import _localize
from pmark_theory._validate import (
    PMarkValueError,
    check_positive_int,
    check_size,
    check_unit_interval,
)

__all__ = [
    "GRID_DEFAULT",
    "NO_ATTACK",
    "NO_SCHEME",
    "AttackSpec",
    "EvalConfig",
    "RunSpec",
    "build_runs",
    "parse_attacks",
    "parse_grid",
    "unit_seed",
]

#: The pseudo-scheme of the unwatermarked LM (one candidate per sentence, always output: the LM's own law).
NO_SCHEME = "none"
#: The built-in schemes with channels ``b`` that ``--grid`` sweeps when no such scheme is among ``--schemes``.
GRID_DEFAULT = ("online", "offline")


def _schemes() -> tuple[str, ...]:
    """What ``--schemes`` accepts by name: every installed scheme and ``none`` (or a registered MODULE:ATTR)."""
    from pmark_impl.schemes import scheme_names

    return (*scheme_names(), NO_SCHEME)


@dataclass(frozen=True)
class AttackSpec:
    """One attack at its parameters; ``name == "none"`` is the unattacked text.

    Attributes:
      name: a registered attack name (``pmark attacks``) or ``"none"``.
      params: sorted ``(name, value)`` pairs of JSON values (recorded in the report).
    """

    name: str
    params: tuple[tuple[str, Any], ...] = ()

    @property
    def label(self) -> str:
        """``"none"`` or ``"name(p=v, ...)"``: the attack's id in results and file names."""
        if not self.params:
            return self.name
        return f"{self.name}({', '.join(f'{k}={json.dumps(v)}' for k, v in self.params)})"

    @property
    def rate(self) -> float | None:
        """The ``rate`` parameter (``0`` for ``none``), ``None`` for an attack without one."""
        if self.name == "none":
            return 0.0
        value = dict(self.params).get("rate")
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    def as_dict(self) -> dict[str, Any]:
        return {"attack": self.name, "label": self.label, "params": dict(self.params), "rate": self.rate}


NO_ATTACK = AttackSpec("none")


_ATTACK_SYNTAX = "NAME or NAME:param=value[,value...][;param=value] (NAME may be a plug-in's module:function)"


def _split_attack(text: str) -> tuple[str, str]:
    """``"NAME:params"`` → ``(NAME, params)``; ``NAME`` is a registered name or a plug-in ``module:function``.

    ``module:function`` is read as a name when the part after the first ``:`` (up to a second ``:``) holds no
    ``=`` and the part before is not a registered attack: ``mypkg.attacks:drop:strength=2``.
    """
    from pmark_impl.attacks import attack_plugins, list_attacks

    head, sep, rest = text.partition(":")
    head = head.strip()
    if not sep or head == "none" or head in list_attacks() or head in attack_plugins():
        return head, rest
    attr, _, params = rest.partition(":")
    if "=" not in attr and attr.strip():
        return f"{head}:{attr.strip()}", params
    return head, rest


def parse_attacks(text: str) -> list[AttackSpec]:
    """``"NAME"`` or ``"NAME:param=v1,v2;other=w"`` → one :class:`AttackSpec` per value combination.

    A parameter with several comma-separated values expands into one attack per value (``word-delete:rate=
    0.1,0.3`` is two attacks); values are read as strict JSON where they are JSON
    (:func:`pmark_theory.infra.json.loads_strict`), else as strings. ``NAME`` is a registered attack, an entry-point
    plug-in, or a plug-in ``module:function`` marked ``@plugin("attack")`` (then written
    ``module:function:param=value``); anything else is refused before it runs. A registered attack's numeric
    ``rate`` that is not given takes its registered default, so that every rate is on record. Each attack is
    built once here (:func:`pmark_impl.attacks.get_attack`) so unknown names and bad parameters fail before
    generation; ``sentence-insert`` / ``copy-paste`` take each document's human sentences unless given.

    Raises:
      PMarkValueError: empty text, a parameter not written ``name=value``, a parameter given twice, a value
        listed twice for one parameter, an empty value, an unknown or unregistered attack, an unknown parameter,
        a value of the wrong type or out of range.
    """
    from pmark_impl.attacks import get_attack, list_attacks, parse_param_value, show, value_key

    if not isinstance(text, str) or not text.strip():
        raise PMarkValueError(f"--attack must be {_ATTACK_SYNTAX}")
    name, rest = _split_attack(text.strip())
    if name == "none":
        if rest.strip():
            raise PMarkValueError("--attack none takes no parameters")
        return [NO_ATTACK]
    where = f"--attack {show(text)}"
    grid: list[tuple[str, list[Any]]] = []
    for item in filter(None, (s.strip() for s in rest.split(";"))):
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key or not raw.strip():
            raise PMarkValueError(f"{where}: parameter {show(item)} must be written name=value[,value...]")
        if any(key == k for k, _ in grid):
            raise PMarkValueError(
                f"{where} gives the parameter {key!r} twice (list its values once: {key}=a,b)"
            )
        values: list[Any] = []
        seen: set[str] = set()
        for v in raw.split(","):
            if not v.strip():
                raise PMarkValueError(f"{where}: {key} has an empty value")
            value = parse_param_value(v.strip(), f"{where} {key}")
            if value_key(value) in seen:
                raise PMarkValueError(f"{where} lists the value {v.strip()} of {key} twice")
            seen.add(value_key(value))
            values.append(value)
        grid.append((key, values))
    spec = list_attacks().get(name)
    given = {k for k, _ in grid}
    if spec is not None and "rate" in spec.params and "rate" not in given:
        grid.append(("rate", [spec.params["rate"]]))
    combos: list[dict[str, Any]] = [{}]
    for key, values in grid:
        combos = [{**c, key: v} for c in combos for v in values]
    out = []
    for params in combos:
        doc = _localize.DOCUMENT_PARAMS.get(name)  # filled per document: checked here with a placeholder
        own = {doc: list(_localize.PLACEHOLDER_SENTENCES)} if doc else {}
        get_attack(name, **own, **params)  # PMarkValueError: unknown attack / parameter / value
        out.append(AttackSpec(name, tuple(sorted(params.items()))))
    return out


def parse_grid(text: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``"N=8,16,32,64 b=1,2,3,4"`` → ``((8, 16, 32, 64), (1, 2, 3, 4))`` (the paper's Table 3 sweep).

    Raises:
      PMarkValueError: a part other than ``N=`` / ``b=``, a missing part, a value that is not a positive int.
    """
    parts: dict[str, tuple[int, ...]] = {}
    for item in str(text).replace(";", " ").split():
        key, sep, raw = item.partition("=")
        if not sep or key not in ("N", "b") or key in parts:
            raise PMarkValueError(f"--grid must be 'N=n1,n2,... b=b1,b2,...', got {text!r}")
        try:
            values = tuple(int(v) for v in raw.split(","))
        except ValueError:
            raise PMarkValueError(f"--grid {key} values must be integers, got {raw!r}") from None
        bound = MAX_CANDIDATES if key == "N" else MAX_CHANNELS
        parts[key] = tuple(check_size(f"--grid {key}", v, maximum=bound) for v in values)
    if set(parts) != {"N", "b"}:
        raise PMarkValueError(f"--grid needs both N= and b=, got {text!r}")
    return parts["N"], parts["b"]


@dataclass(frozen=True)
class RunSpec:
    """One scheme configuration of an evaluation.

    Attributes:
      run_id: unique id (``"offline-N64-b4"``), also the folder of its unit files.
      scheme: a scheme's name (:func:`pmark_impl.schemes.get_scheme`) or :data:`NO_SCHEME`.
      n_candidates: ``N`` (``1`` for ``none``).
      channels: ``b`` for online / offline, ``None`` otherwise.
      attacks: the attacks its texts go through (``none`` first; empty for scheme ``none``).
      grid: part of the ``--grid`` sweep (no-attack only).
      settings: sorted ``(name, value)`` pairs passed to ``generate`` / ``detect``.
    """

    run_id: str
    scheme: str
    n_candidates: int
    channels: int | None
    attacks: tuple[AttackSpec, ...] = ()
    grid: bool = False
    settings: tuple[tuple[str, Any], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "run": self.run_id,
            "scheme": self.scheme,
            "n_candidates": self.n_candidates,
            "channels": self.channels,
            "grid": self.grid,
            "settings": dict(self.settings),
            "attacks": [a.as_dict() for a in self.attacks],
        }


def _scheme_settings(
    scheme: Any, options: dict[str, Any], n: int, b: int | None, cli_defaults: bool = False
) -> tuple[tuple[str, Any], ...]:
    """The scheme's own settings among ``options`` (given ones; with ``cli_defaults`` also each option's
    ``cli_default``, the command line's default), checked with its rules for ``(N, b)``."""
    from pmark_impl.schemes import resolve_settings

    own = {o.name: options[o.name] for o in scheme.options if options.get(o.name) is not None}
    if cli_defaults:
        own.update(
            {o.name: o.cli_default for o in scheme.options if o.name not in own and o.cli_default is not None}
        )
    resolve_settings(scheme, own, n_candidates=n, channels=b or 1)  # its checks and cross-option rules
    return tuple(sorted(own.items()))


def build_runs(
    schemes: list[str],
    attacks: list[AttackSpec],
    *,
    n_candidates: int | None = None,
    channels: int = 4,
    grid: tuple[tuple[int, ...], tuple[int, ...]] | None = None,
    cli_defaults: bool = False,
    **options: Any,
) -> tuple[RunSpec, ...]:
    """The runs of an evaluation, ``none`` first, then the schemes in the order given, then the grid.

    Args:
      schemes: scheme names or registered ``module:attribute`` (:func:`pmark_impl.schemes.get_scheme`) and
        :data:`NO_SCHEME` (duplicates are an error).
      attacks: attacks of every non-``none`` run (the unattacked text is always evaluated, first).
      n_candidates: ``N`` of every watermarking scheme (default per scheme: its ``default_n``).
      channels: ``b`` of the schemes with channels.
      grid: ``(Ns, bs)``: extra no-attack runs of the schemes with channels (those among ``schemes``, else
        :data:`GRID_DEFAULT`) for every ``(N, b)`` (the paper's Table 3).
      cli_defaults: a setting not given takes the command line's default (``Option.cli_default``, e.g. offline's
        batch of 16) rather than ``generate``'s, in every run of its scheme (the grid's included).
      **options: scheme settings (each run takes its scheme's own); ``None`` values take ``generate``'s defaults.

    Raises:
      PMarkValueError: no or unknown or repeated scheme, a setting no scheme has, a scheme's rule broken (online
        ``N % 2**b != 0``, named for each grid pair).
    """
    from pmark_impl.schemes import get_scheme

    if not schemes:
        raise PMarkValueError(f"--schemes needs at least one of {', '.join(_schemes())}")
    resolved = {}
    for s in schemes:
        if s != NO_SCHEME:
            try:
                resolved[s] = get_scheme(s)
            except PMarkValueError as exc:
                raise PMarkValueError(
                    f"unknown scheme {s!r}; known schemes: {', '.join(_schemes())} ({exc})"
                ) from None
            if resolved[s].detect is None or resolved[s].record is None:
                missing = "detector" if resolved[s].detect is None else "evaluation record (Scheme.record)"
                raise PMarkValueError(f"scheme {resolved[s].name!r} cannot be evaluated: it has no {missing}")
    names = [resolved[s].name if s in resolved else s for s in schemes]
    if len(set(names)) != len(names):
        raise PMarkValueError(f"--schemes lists a scheme twice: {','.join(schemes)}")
    from pmark_impl._limits import LIMITS

    b = check_limit("channels", channels)
    if n_candidates is not None:
        check_limit("n_candidates", n_candidates)
    for name, value in options.items():  # the same bounds as generate's flags and provenance records
        if value is not None and name in LIMITS:
            check_limit(name, value)
    unknown = sorted(set(options) - {o.name for sc in resolved.values() for o in sc.options})
    if unknown and any(options[u] is not None for u in unknown):
        given = [u for u in unknown if options[u] is not None]
        if given:
            raise PMarkValueError(
                f"setting(s) {', '.join(given)} belong to none of the schemes {','.join(names)}"
            )
    from pmark_impl.attacks import value_key

    chain = [NO_ATTACK, *(a for a in attacks if a != NO_ATTACK)]
    keys = [(a.name, tuple((k, value_key(v)) for k, v in a.params)) for a in chain]  # rate=1 is rate=1.0
    if len(set(keys)) != len(keys):
        raise PMarkValueError(f"an attack is listed twice: {', '.join(a.label for a in chain)}")
    runs: list[RunSpec] = []
    for s in sorted(schemes, key=lambda s: s != NO_SCHEME):
        if s == NO_SCHEME:
            runs.append(RunSpec(NO_SCHEME, NO_SCHEME, 1, None, ()))
            continue
        sc = resolved[s]
        n = sc.default_n if n_candidates is None else n_candidates
        ch = b if sc.channels else None
        settings = _scheme_settings(sc, options, n, ch, cli_defaults)
        run_id = f"{sc.name}-N{n}" + (f"-b{ch}" if ch else "")
        runs.append(RunSpec(run_id, sc.name, n, ch, tuple(chain), settings=settings))
    if grid is not None:
        ns, bs = grid
        swept = [sc for sc in resolved.values() if sc.channels] or [get_scheme(g) for g in GRID_DEFAULT]
        for sc in swept:
            bad, first = [], ""
            for n in ns:
                for bb in bs:
                    try:
                        _scheme_settings(sc, options, n, bb, cli_defaults)
                    except PMarkValueError as exc:
                        bad.append(f"N={n}, b={bb}")
                        first = first or str(exc)
            if bad:
                raise PMarkValueError(f"--grid: {sc.name}: {first}; not so for {'; '.join(bad)}")
        index = {r.run_id: i for i, r in enumerate(runs)}
        for sc in swept:
            for n in ns:
                for bb in bs:
                    run_id = f"{sc.name}-N{n}-b{bb}"
                    if run_id in index:  # the main run is also a grid cell (with its attacks)
                        runs[index[run_id]] = dataclasses.replace(runs[index[run_id]], grid=True)
                        continue
                    settings = _scheme_settings(sc, options, n, bb, cli_defaults)
                    runs.append(RunSpec(run_id, sc.name, n, bb, (NO_ATTACK,), True, settings))
                    index[run_id] = len(runs) - 1
    return tuple(runs)


@dataclass(frozen=True)
class EvalConfig:
    """Runs plus what they share.

    Attributes:
      runs: from :func:`build_runs`.
      max_sentences: sentences per watermarked text at most (the human negative is cut to the text's count).
      seed: base seed; each (run, document) derives its own (:func:`unit_seed`).
      alphas: levels of the exact test and of the empirical-threshold TPR.
      confidence: level of every interval.
      min_sentences: the detector's minimum (fewer sentences: "not enough evidence", p = 1).
      localize: how the texts of ``copy-paste`` / ``sentence-insert`` and the human negatives are also localised
        (``"shifted"``, ``"aligned"``; ``None``: not; :mod:`pmark_impl.evaluate._localize`, issue 39).
    """

    runs: tuple[RunSpec, ...]
    max_sentences: int = 12
    seed: int = 0
    alphas: tuple[float, ...] = (0.01, 0.05)
    confidence: float = 0.95
    min_sentences: int = 2
    localize: str | None = "shifted"

    def __post_init__(self) -> None:
        object.__setattr__(self, "localize", _localize.check_localize_setting(self.localize))
        check_limit("max_sentences", self.max_sentences)
        check_positive_int("seed", self.seed, minimum=0)
        check_positive_int("min_sentences", self.min_sentences)
        check_unit_interval("confidence", self.confidence, open_left=True, open_right=True)
        for a in self.alphas:
            check_unit_interval("alpha", a, open_left=True, open_right=True)
        if not self.runs:
            raise PMarkValueError("an evaluation needs at least one run")

    @property
    def max_channels(self) -> int:
        """The key's channels: the largest ``b`` of any run (1 if none has channels)."""
        return max([r.channels for r in self.runs if r.channels] or [1])

    def run(self, run_id: str) -> RunSpec:
        return next(r for r in self.runs if r.run_id == run_id)

    def as_dict(self) -> dict[str, Any]:
        loc = _localize.localizes(
            self.runs, self.localize
        )  # in config.json: units without it are not resumed
        return {
            "runs": [r.as_dict() for r in self.runs],
            "max_sentences": self.max_sentences,
            "seed": self.seed,
            "alphas": list(self.alphas),
            "confidence": self.confidence,
            "min_sentences": self.min_sentences,
            **({"localize": self.localize} if loc else {}),
        }


def unit_seed(seed: int, *parts: str) -> int:
    """A 31-bit seed for one (run, document[, attack]) from the base ``seed``: SHA-256 of the parts.

    It never depends on the rank or on the order units run in, so a sharded or resumed evaluation gives the
    same texts as one uninterrupted process.
    """
    data = "\x1f".join([str(int(seed)), *parts]).encode()
    return int.from_bytes(hashlib.sha256(data).digest()[:4], "big") >> 1
