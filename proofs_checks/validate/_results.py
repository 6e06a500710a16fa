"""The result of :func:`~proofs_checks.validate.validate_proxy`: sections, simulation confirmations and flags."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from proofs_checks._io import to_jsonable
from proofs_checks.validate._evidence import Evidence
from proofs_checks.validate._robustness import Robustness
from proofs_checks.validate._stats import Dependence, Estimate
from proofs_checks.validate._text import LengthBias, TextRobustness

__all__ = ["SEVERITIES", "Flag", "ProxyValidation", "SimulationCheck", "as_plain"]

#: ``error``: the proxy cannot be used as is (or the battery found an inconsistency); ``warning``: a scheme built
#: on it distorts or detects poorly; ``info``: worth knowing.
SEVERITIES = ("error", "warning", "info")


class Flag(NamedTuple):
    """A finding of the battery: a short code, a severity and a message that says why."""

    code: str
    severity: str
    message: str


class SimulationCheck(NamedTuple):
    """Monte Carlo of a scheme with this proxy against its exact law (the exact/MC pair).

    Attributes:
      scheme: ``"online N=64"``, ``"offline N=64"``, ``"semstamp g=2"``, ``"interval"``.
      claim: the claim the exact law comes from.
      n_trials: simulated outputs.
      exact_tv: TV of the exact watermarked law from the data law.
      mc_tv, mc_tv_se: plug-in TV of the simulated histogram from the exact watermarked law (biased upward
        by the sampling noise, see ``simulations.tv_null_bias``) and its standard error.
      chi2, dof, p_value: chi-square goodness of fit against the exact law (small cells pooled).
      cell_p: smallest exact two-sided binomial p-value over the sentences, times their number (Bonferroni);
        exact tails rather than normal z-scores, so cells with expected counts far below 1 raise no false alarm.
      consistent: ``p_value > 1e-3`` and ``cell_p > 1e-3`` (false-alarm rate about 2e-3).
      control_tv: NEGATIVE CONTROL: TV of a wrong law (the exact law reweighted by 1.5 / 0.5 on a fixed random
        half of the sentences) from the exact law; control_p_value: chi-square p of the same histogram against
        it; control_failed: the wrong law was rejected, as it must be (``None`` when the exact law has a single
        sentence, so no wrong law exists).
    """

    scheme: str
    claim: str
    n_trials: int
    exact_tv: float
    mc_tv: float
    mc_tv_se: float
    chi2: float
    dof: int
    p_value: float
    cell_p: float
    consistent: bool
    control_tv: float = float("nan")
    control_p_value: float = float("nan")
    control_failed: bool | None = None


class ProxyValidation(NamedTuple):
    """Everything the battery measured on one proxy and one data set (sections are ``None`` when not applicable).

    Attributes:
      name, kind: the proxy's.
      data: ``kind`` (``"universe"`` exact masses, ``"embeddings"``, ``"corpus"``, ``"source"``), ``n_sentences``,
        ``d``, ``exact`` (exact law vs. empirical), ``normalised`` (rows rescaled to unit norm).
      settings: the arguments of the run.
      channels: ``b`` (continuous).
      sign_balance: ``[b]`` :class:`Estimate` of ``p_j = P(F_j > 0)`` (continuous).
      medians: ``[b]`` median of each ``F_j`` under the data law (the online detector's threshold).
      pattern_masses, pattern_lo, pattern_hi: ``π(σ)``, shape ``(2,)*b``, with Clopper–Pearson bounds.
      dependence: channel dependence (:class:`~proofs_checks.validate._stats.Dependence`).
      offline_tv: ``{"8": Estimate, …, "inf": Estimate}``, offline PMark's ``TV_N`` (X2, C15, C16).
      online: admissible / inadmissible ``N`` (E6) and ``balance``
        (:class:`~proofs_checks.validate._robustness.OnlineBalance`).
      function_checks: ``deterministic`` (two calls agree) and ``batch_invariant`` (a row's value does not depend
        on the other rows), with the largest differences seen (exact for cells, 1e-9 relative otherwise).
      robustness: :class:`Robustness` (C11).
      evidence: :class:`Evidence` (C14, X3).
      cell_masses: ``[M]`` :class:`Estimate` of ``q(u)`` (cells); green_size: ``g``; semstamp_factor: ``A [M]``
        (``None`` when ``zero_cells >= g``: some green set has mass 0 and the law is undefined, C6).
      interval_mass: :class:`Estimate` of ``μ(G)`` (interval).
      tv: TV of the scheme (cells: SemStamp, C7; interval: ``1 − μ(G)``, E20).
      cell_change: random-rotation change rate of the cell / of the validity (cells, interval): ``etas``,
        ``rate``, ``lo``, ``hi``.
      histogram: interval proxies: the law of ``F`` as ``edges [B+1]`` and ``mass [B]`` (for the report).
      text_robustness: corpus data: word deletion against the geometry's prediction for the measured ``η``
        (:class:`~proofs_checks.validate._text.TextRobustness`).
      length_bias: corpus data, continuous and interval proxies: correlation with sentence length
        (:class:`~proofs_checks.validate._text.LengthBias`).
      confirmations: the :class:`SimulationCheck` s.
      flags: the :class:`Flag` s.
      distortion_free: scheme -> verdict (``True``/``False``; ``None`` when undefined).
    """

    name: str
    kind: str
    data: dict[str, Any]
    settings: dict[str, Any]
    channels: int | None = None
    sign_balance: list[Estimate] | None = None
    medians: np.ndarray | None = None
    pattern_masses: np.ndarray | None = None
    pattern_lo: np.ndarray | None = None
    pattern_hi: np.ndarray | None = None
    dependence: Dependence | None = None
    offline_tv: dict[str, Estimate] | None = None
    online: dict[str, Any] | None = None
    function_checks: dict[str, Any] | None = None
    robustness: Robustness | None = None
    evidence: Evidence | None = None
    cell_masses: list[Estimate] | None = None
    green_size: int | None = None
    semstamp_factor: np.ndarray | None = None
    zero_cells: int | None = None
    interval_mass: Estimate | None = None
    tv: Estimate | None = None
    cell_change: dict[str, Any] | None = None
    histogram: dict[str, Any] | None = None
    text_robustness: TextRobustness | None = None
    length_bias: LengthBias | None = None
    confirmations: tuple[SimulationCheck, ...] = ()
    flags: tuple[Flag, ...] = ()
    distortion_free: dict[str, bool | None] | None = None

    @property
    def ok(self) -> bool:
        """No flag of severity ``error``."""
        return not any(f.severity == "error" for f in self.flags)

    @property
    def clean(self) -> bool:
        """No flag of severity ``error`` or ``warning`` (what ``--strict`` requires; ``info`` flags never count)."""
        return not any(f.severity in ("error", "warning") for f in self.flags)

    def flag_codes(self) -> set[str]:
        """The codes of all flags."""
        return {f.code for f in self.flags}

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict (arrays as lists, NaN/inf as strings)."""
        return to_jsonable(as_plain(self))


def as_plain(obj: Any) -> Any:
    """NamedTuples -> dicts, recursively (arrays kept)."""
    if isinstance(obj, tuple) and hasattr(obj, "_asdict"):
        return {k: as_plain(v) for k, v in obj._asdict().items()}
    if isinstance(obj, dict):
        return {str(k): as_plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [as_plain(v) for v in obj]
    return obj
