"""SimMark (Dabiriaghdam & Wang, EMNLP 2025; E20) as a scheme: no key, a cosine interval, a calibrated ``γ``.

A candidate is valid when the cosine of its embedding with the previous sentence's lies in
``G = [simmark_low, simmark_high]``; batches of ``N`` are redrawn up to ``max_trials`` times, then a uniform
candidate of the last batch is output. The key only seeds the sampling randomness (E20: the watermark itself is
keyless). Detection needs the detector calibration ``γ`` measured on human text (``pmark calibrate-simmark``):
:func:`pmark_impl.schemes._simmark_rule.detect_simmark`, with the conservative p-value of
:func:`pmark_theory._simmark.simmark_pvalue`. The step, the detector and the differences from the reference
implementation are documented in :mod:`pmark_impl.schemes._simmark_rule`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jax
import numpy as np

from pmark_impl._limits import check_limit
from pmark_impl.sampling import check_number, embed
from pmark_impl.schemes._base import DetectRequest, Draw, Option, Scheme, SchemeCalibration, Setup, StepOutput
from pmark_impl.schemes._simmark_calibration import calibrate_simmark, load_simmark_calibration
from pmark_impl.schemes._simmark_rule import detect_simmark, previous_embedding, simmark_step
from pmark_theory._simmark import SIMMARK_HIGH, SIMMARK_LOW, check_simmark_interval
from pmark_theory._validate import PMarkValueError

__all__ = ["SCHEME"]


def _cosine(name: str) -> Any:
    def check(value: Any) -> float:
        value = float(check_number(name, value))
        if not -1.0 <= value <= 1.0:
            raise PMarkValueError(f"{name} must be a cosine in [-1, 1], got {value!r}")
        return value

    return check


def _check(settings: dict[str, Any], key: Any, n: int, b: int) -> dict[str, Any]:
    low, high = check_simmark_interval(settings["simmark_low"], settings["simmark_high"])
    return {**settings, "simmark_low": float(low), "simmark_high": float(high)}


def _init(setup: Setup) -> np.ndarray | None:
    """The previous sentence of sentence 0: the prompt's last sentence (none: unconditioned)."""
    return previous_embedding(setup.encoder, setup.prompt, setup.splitter)


def _step(rng: jax.Array, setup: Setup, prev_emb: np.ndarray | None, draw: Draw) -> StepOutput:
    s = setup.settings
    return simmark_step(
        rng,
        draw.sampler,
        setup.encoder,
        draw.context,
        draw.generator,
        prev_emb,
        setup.n_candidates,
        s["simmark_low"],
        s["simmark_high"],
        s["max_trials"],
    )


def _update(setup: Setup, state: Any, text: str) -> np.ndarray:
    """The previous sentence of ``t + 1``, embedded as detection embeds it."""
    return embed(setup.encoder, [text], setup.key.dim)[0]


def _detect(request: DetectRequest) -> list[Any]:
    if request.calibration is None:
        raise PMarkValueError(
            "simmark detection needs its calibration of gamma on human text (pmark calibrate-simmark; "
            "pmark_impl.load_simmark_calibration(path))"
        )
    out = []
    for sentences in request.sentences:
        out.append(
            detect_simmark(
                sentences,
                request.encoder,
                request.calibration,
                prompt=request.prompt,
                alpha=request.options["alpha"],
                splitter=request.options.get("splitter"),
            )
        )
        if request.progress is not None:
            request.progress(len(sentences))
    return out


def _record(det: Any) -> dict[str, Any]:
    """The evaluation record: pairs in ``G`` of all consecutive pairs; ``γ`` is estimated, no exact null (E20)."""
    return {
        "raw_p_value": float(det.p_value),
        "n_sentences": int(det.n_pairs),
        "matches": [int(det.hard_count)],
        "totals": [int(det.n_pairs)],
        "null_p": None,
        "p_value_plug_in": float(det.p_value_plug_in),
        "evidence": [[round(float(c), 6)] for c in det.cosines],
    }


def _fit(encoder: Any, documents: Sequence[Any], settings: Mapping[str, Any]) -> Any:
    return calibrate_simmark(encoder, documents, settings["simmark_low"], settings["simmark_high"])


SCHEME = Scheme(
    name="simmark",
    summary="SimMark: keep a candidate whose cosine with the previous sentence lies in [low, high]; keyless (E20)",
    step=_step,
    detect=_detect,
    options=(
        Option("simmark_low", SIMMARK_LOW, _cosine("simmark_low"), "lower end of the cosine interval G"),
        Option("simmark_high", SIMMARK_HIGH, _cosine("simmark_high"), "upper end of the cosine interval G"),
        Option(
            "max_trials",
            16,
            lambda v: check_limit("max_trials", v),
            "batches of N drawn at most before the uniform fallback (reference: N = 1, 100 trials)",
        ),
    ),
    check=_check,
    init=_init,
    update=_update,
    record=_record,
    calibration=SchemeCalibration(
        "gamma",
        "detector",
        "pmark calibrate-simmark --out CALIBRATION",
        fit=_fit,
        load=load_simmark_calibration,
    ),
    default_n=16,
    keyed=False,
)
