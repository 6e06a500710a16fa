"""Sentence-level watermarking schemes on the real model, one module each, behind one interface (issue 25).

* :class:`Scheme` — the interface (:mod:`pmark_impl.schemes._base`): settings, per-text state, one step, the
  detector, the evaluation record, the calibration it declares.
* :func:`get_scheme` — find a scheme by name (built-in or installed plug-in) or ``module:attribute``
  (registered with ``@plugin("scheme")``); :func:`scheme_names`, :func:`available_schemes` list them.
* Built-ins: :mod:`~pmark_impl.schemes.online`, :mod:`~pmark_impl.schemes.offline` (PMark),
  :mod:`~pmark_impl.schemes.semstamp`, the centroid variant, :mod:`~pmark_impl.schemes.simmark`.

A plug-in scheme is checked when it loads and runs behind a guard (:mod:`pmark_impl.schemes._guard`): a fault of
its code is a :class:`PluginFault` (a ``PMarkValueError``) naming the plug-in, the call and the message.

``docs/architecture.md`` ("Add a scheme") walks through ``examples/halfspace_scheme.py``, a scheme outside the
package that runs through every command.
"""

from pmark_impl.schemes._base import (
    DetectRequest,
    Draw,
    Option,
    Scheme,
    SchemeCalibration,
    Setup,
    StepOutput,
)
from pmark_impl.schemes._registry import (
    BUILTIN_SCHEMES,
    DEFAULT_SCHEME,
    available_schemes,
    get_scheme,
    scheme_names,
)
from pmark_impl.schemes._results import count_record, decide
from pmark_impl.schemes._settings import recorded_settings, resolve_settings
from pmark_theory._plugins import PluginFault

__all__ = [
    "BUILTIN_SCHEMES",
    "DEFAULT_SCHEME",
    "DetectRequest",
    "Draw",
    "Option",
    "PluginFault",
    "Scheme",
    "SchemeCalibration",
    "Setup",
    "StepOutput",
    "available_schemes",
    "count_record",
    "decide",
    "get_scheme",
    "recorded_settings",
    "resolve_settings",
    "scheme_names",
]
