"""pmark_impl: PMark on a real LLM and sentence encoder — keys, generation, detection, the ``pmark`` CLI.

Imports ``pmark_theory`` (the rules and exact laws), never ``simulations``. The model side (torch,
transformers, sentence-transformers) is imported lazily on first use of its names.
"""

from __future__ import annotations

import importlib
from typing import Any

from pmark_impl.detection._detect import (
    DETECT_MODES,
    ChannelEvidence,
    DetectionResult,
    SentenceEvidence,
    detect,
)
from pmark_impl.generation._types import GenerationResult, SentenceEncoder, SentenceSampler, StepInfo
from pmark_impl.generation._watermark import MODES, context_for, generate
from pmark_impl.keys._key_files import load_key, save_key
from pmark_impl.keys._keys import KeyFileError, WatermarkKey

#: Model-side names, imported on first access (they pull in torch / transformers).
_LAZY = {
    "split_sentences": "pmark_impl.sampling._segment",
    "SamplingConfig": "pmark_impl.sampling._sampler",
    "Candidate": "pmark_impl.sampling._sampler",
    "LMSentenceSampler": "pmark_impl.sampling._sampler",
    "generate_many": "pmark_impl.generation._many",
    "Encoder": "pmark_impl.sampling._encoder",
    "load_lm": "pmark_impl.sampling._models",
    "load_encoder": "pmark_impl.sampling._models",
    "key_recovery_on_text": "pmark_impl._security",
    "Provenance": "pmark_impl.generation._provenance",
    "load_provenance": "pmark_impl.generation._provenance",
    "save_provenance": "pmark_impl.generation._provenance",
    "get_attack": "pmark_impl.attacks",
    "attack_plugins": "pmark_impl.attacks",
    "plugin": "pmark_theory._plugins",
    "list_attacks": "pmark_impl.attacks",
    "attack_similarity": "pmark_impl.attacks",
    "evidence_flips": "pmark_impl.attacks",
    "perplexity": "pmark_impl.quality",
    "distinct_n": "pmark_impl.quality",
    "repetition_n": "pmark_impl.quality",
    "semantic_similarity": "pmark_impl.quality",
    "detect_many": "pmark_impl.detection._detect",
    "decision_record": "pmark_impl.detection._detect_result",
    "QueryCounter": "pmark_impl.detection._queries",
    "QueryStatus": "pmark_impl.detection._queries",
    "Scheme": "pmark_impl.schemes",
    "get_scheme": "pmark_impl.schemes",
    "scheme_names": "pmark_impl.schemes",
    "KeyCalibration": "pmark_impl.keys._calibration",
    "calibrate_key": "pmark_impl.keys._calibrate",
    "key_fpr_study": "pmark_impl.keys._calibrate",
    "builtin_documents": "pmark_impl._corpus",
    "read_corpus": "pmark_impl._corpus",
    "KeyCentroids": "pmark_impl.keys._centroids",
    "fit_centroids": "pmark_impl.keys._centroids",
    "fit_key_centroids": "pmark_impl.keys._centroids",
    "detect_simmark": "pmark_impl._simmark",
    "SimMarkDetection": "pmark_impl._simmark",
    "SimMarkCalibration": "pmark_impl._simmark_calibration",
    "calibrate_simmark": "pmark_impl._simmark_calibration",
    "load_simmark_calibration": "pmark_impl._simmark_calibration",
    "save_simmark_calibration": "pmark_impl._simmark_calibration",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'pmark_impl' has no attribute {name!r}")


__all__ = [
    "DETECT_MODES",
    "MODES",
    "ChannelEvidence",
    "DetectionResult",
    "GenerationResult",
    "KeyFileError",
    "SentenceEncoder",
    "SentenceEvidence",
    "SentenceSampler",
    "StepInfo",
    "WatermarkKey",
    "context_for",
    "detect",
    "generate",
    "load_key",
    "save_key",
    *sorted(_LAZY),
]
