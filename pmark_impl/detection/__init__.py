"""Detection of a text with any scheme — layer 5 of ``pmark_impl`` (see ``docs/architecture.md``, "Layers").

:func:`detect` and :func:`detect_many` (:mod:`._detect`) check the arguments, split each text within its size
budget, run the scheme's detector and apply the key's text-level null where it holds one (K3, :mod:`._text_null`;
fitted by :func:`fit_text_null`, :mod:`._text_null_fit`); :class:`QueryCounter` counts the queries a deployed
detector answers (S1, :mod:`._queries`). The result and its verdicts are the schemes' shared vocabulary
(:class:`pmark_impl.schemes.DetectionResult`). Detection never imports generation, nor generation detection.

Other units import these names from here (``from pmark_impl.detection import detect``), never from the modules.
"""

from __future__ import annotations

from pmark_impl._lazy import lazy_getattr
from pmark_impl.detection._detect import DETECT_MODES, detect, detect_many

#: Names imported on first access: ``import pmark_impl`` (and ``pmark --help``) does not need them.
_LAZY = {
    "QueryCounter": "pmark_impl.detection._queries",
    "QueryCounterError": "pmark_impl.detection._queries",
    "QueryStatus": "pmark_impl.detection._queries",
    "warning_thresholds": "pmark_impl.detection._queries",
    "LookupEncoder": "pmark_impl.detection._text_null_fit",
    "fit_text_null": "pmark_impl.detection._text_null_fit",
    "measure_text_null": "pmark_impl.detection._text_null_fit",
    "text_windows": "pmark_impl.detection._text_null_fit",
}


__getattr__ = lazy_getattr(__name__, _LAZY)


__all__ = ["DETECT_MODES", "detect", "detect_many", *sorted(_LAZY)]
