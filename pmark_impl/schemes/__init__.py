"""Sentence-level watermarking schemes on the real model, one module each, behind one interface (issue 25).

* :class:`Scheme` — the interface (:mod:`pmark_impl.schemes._base`): settings, per-text state, one step, the
  detector, the evaluation record, the calibration it declares.
* :func:`get_scheme` — find a scheme by name (built-in or installed plug-in) or ``module:attribute``
  (registered with ``@plugin("scheme")``); :func:`scheme_names`, :func:`available_schemes` list them.
* Built-ins: :mod:`~pmark_impl.schemes.online`, :mod:`~pmark_impl.schemes.offline` (PMark),
  :mod:`~pmark_impl.schemes.semstamp`, the centroid variant, :mod:`~pmark_impl.schemes.simmark`.
* Their key material (issue 37): :mod:`~pmark_impl.schemes.pmark_key` (PMark's pivots, bits and context seeds)
  and :mod:`~pmark_impl.schemes.cell_key` (the green sets and green-count test of the cell schemes), functions
  of the key (``pmark_key.pivots(key)``); the key itself holds the secret and the stored calibrations.

A plug-in scheme is checked when it loads and runs behind a guard (:mod:`pmark_impl.schemes._guard`): a fault of
its code is a :class:`PluginFault` (a ``PMarkValueError``) naming the plug-in, the call and the message.

``docs/architecture.md`` ("Add a scheme") walks through ``examples/halfspace_scheme.py``, a scheme outside the
package that runs through every command.

Layer 4 of ``pmark_impl`` (``docs/architecture.md``, "Layers"): below generation and detection, which drive any
scheme, this package also holds what they decide with — the shared decision vocabulary (:class:`DetectionResult`,
the verdicts and output records, :mod:`._decision`), which scheme and channels a call runs
(:func:`resolve_scheme`, :func:`resolve_channels`, :mod:`._resolve`) — and what belongs to one scheme: PMark's
statistics, tests, key resampling and per-key calibration (:mod:`._pmark_stats`, :mod:`._pmark_tests`,
:mod:`._pmark_resample`, :mod:`._pmark_calibrate`), SimMark's rule and calibration (:mod:`._simmark_rule`,
:mod:`._simmark_calibration`). Other units import these names from here, never from the modules.
"""

from __future__ import annotations

from pmark_impl.schemes import cell_key, pmark_key
from pmark_impl.schemes._base import (
    DetectRequest,
    Draw,
    Option,
    Scheme,
    SchemeCalibration,
    SentenceLaws,
    Setup,
    StepOutput,
)
from pmark_impl.schemes._cell_fit import held_out_fpr
from pmark_impl.schemes._decision import (
    DECISION_NOTE,
    DETECTOR_OUTPUT_LEVELS,
    EVIDENCE_WARNING,
    TOTAL_STATISTICS,
    VERDICT_NO_WATERMARK,
    VERDICT_NOT_ENOUGH,
    VERDICT_WATERMARKED,
    ChannelEvidence,
    DetectionResult,
    SentenceEvidence,
    decision_record,
    output_record,
    record_json,
    verdict,
)
from pmark_impl.schemes._localize import (
    LOCALIZATION_NOTE,
    LOCALIZE_MODES,
    MAX_LOCALIZE_SENTENCES,
    check_localizable,
    check_localize_mode,
    localize,
)
from pmark_impl.schemes._pmark_calibrate import (
    ALPHAS,
    calibrate_key,
    clopper_pearson,
    fpr_verdict,
    key_fpr_study,
)
from pmark_impl.schemes._pmark_stats import ADAPTIVE_RESOLUTION
from pmark_impl.schemes._pmark_tests import PMARK_TESTS, resolve_test, scheme_test
from pmark_impl.schemes._registry import (
    BUILTIN_SCHEMES,
    DEFAULT_SCHEME,
    available_schemes,
    get_scheme,
    scheme_names,
)
from pmark_impl.schemes._resolve import resolve_channels, resolve_scheme
from pmark_impl.schemes._results import count_record, decide
from pmark_impl.schemes._settings import (
    is_default,
    known_options,
    recorded_settings,
    resolve_settings,
    scheme_options,
)
from pmark_impl.schemes._simmark_calibration import (
    SimMarkCalibration,
    calibrate_simmark,
    load_simmark_calibration,
    save_simmark_calibration,
)
from pmark_impl.schemes._simmark_rule import SimMarkDetection, detect_simmark
from pmark_theory.infra.plugins import PluginFault

__all__ = [
    "ADAPTIVE_RESOLUTION",
    "ALPHAS",
    "BUILTIN_SCHEMES",
    "DECISION_NOTE",
    "DEFAULT_SCHEME",
    "DETECTOR_OUTPUT_LEVELS",
    "EVIDENCE_WARNING",
    "LOCALIZATION_NOTE",
    "LOCALIZE_MODES",
    "MAX_LOCALIZE_SENTENCES",
    "PMARK_TESTS",
    "TOTAL_STATISTICS",
    "VERDICT_NOT_ENOUGH",
    "VERDICT_NO_WATERMARK",
    "VERDICT_WATERMARKED",
    "ChannelEvidence",
    "DetectRequest",
    "DetectionResult",
    "Draw",
    "Option",
    "PluginFault",
    "Scheme",
    "SchemeCalibration",
    "SentenceEvidence",
    "SentenceLaws",
    "Setup",
    "SimMarkCalibration",
    "SimMarkDetection",
    "StepOutput",
    "available_schemes",
    "calibrate_key",
    "calibrate_simmark",
    "cell_key",
    "check_localizable",
    "check_localize_mode",
    "clopper_pearson",
    "count_record",
    "decide",
    "decision_record",
    "detect_simmark",
    "fpr_verdict",
    "get_scheme",
    "held_out_fpr",
    "is_default",
    "key_fpr_study",
    "known_options",
    "load_simmark_calibration",
    "localize",
    "output_record",
    "pmark_key",
    "record_json",
    "recorded_settings",
    "resolve_channels",
    "resolve_scheme",
    "resolve_settings",
    "resolve_test",
    "save_simmark_calibration",
    "scheme_names",
    "scheme_options",
    "scheme_test",
    "verdict",
]
