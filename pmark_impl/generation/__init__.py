"""Watermarked generation with any scheme — layer 5 of ``pmark_impl`` (see ``docs/architecture.md``, "Layers").

:func:`generate` (:mod:`._watermark`) drives a scheme one sentence at a time and never asks which scheme it drives;
:func:`generate_many` (:mod:`._many`, imported on first use: it pulls in torch) batches many texts through one
decode engine with the same texts; the records a generation returns (:class:`GenerationResult`,
:class:`StepInfo`, :mod:`._types`) and their provenance file (:class:`Provenance`, :mod:`._provenance`,
checked by :mod:`._provenance_schema`). Generation never imports detection, nor detection generation.

Other units import these names from here (``from pmark_impl.generation import generate``), never from the modules.
"""

from __future__ import annotations

from pmark_impl._lazy import lazy_getattr
from pmark_impl.generation._types import GenerationResult, StepInfo
from pmark_impl.generation._watermark import MODES, generate, scheme_settings

#: Names imported on first access: ``generate_many`` pulls in torch, and ``import pmark_impl`` (``pmark --help``)
#: does not need the provenance file.
_LAZY = {
    "generate_many": "pmark_impl.generation._many",
    "check_shared_prefix": "pmark_impl.generation._batch_args",
    "supports_batching": "pmark_impl.generation._batch_args",
    "texts_per_batch": "pmark_impl.generation._batch_args",
    "PROVENANCE_SUFFIX": "pmark_impl.generation._provenance",
    "Provenance": "pmark_impl.generation._provenance",
    "ProvenanceError": "pmark_impl.generation._provenance",
    "ProvenanceStep": "pmark_impl.generation._provenance",
    "load_provenance": "pmark_impl.generation._provenance",
    "provenance_bytes": "pmark_impl.generation._provenance",
    "provenance_path": "pmark_impl.generation._provenance",
    "save_provenance": "pmark_impl.generation._provenance",
}


__getattr__ = lazy_getattr(__name__, _LAZY)


__all__ = ["MODES", "GenerationResult", "StepInfo", "generate", "scheme_settings", *sorted(_LAZY)]
