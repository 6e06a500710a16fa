"""pmark_impl: PMark on a real LLM and sentence encoder — keys, generation, detection, the ``pmark`` CLI.

Imports ``pmark_theory`` (the rules and exact laws), never ``simulations``. The model side (torch,
transformers, sentence-transformers) is imported lazily on first use of its names.

The package is built in layers (``docs/architecture.md``, "Layers"): each subpackage exports its public face
from its ``__init__`` and imports only the faces of the layers below it. This module is the top layer: it gathers
the names a user needs from the faces (never from their private modules).
"""

from __future__ import annotations

# The laws every layer stands on (and jax, scipy) load first, at the top of the import stack: imported from deep
# inside the layers' faces instead, the package took 0.2 s longer to import (measured; ``pmark --help`` pays it).
import pmark_theory
from pmark_impl._lazy import lazy_getattr
from pmark_impl.detection import DETECT_MODES, detect
from pmark_impl.generation import MODES, GenerationResult, StepInfo, generate
from pmark_impl.keys import KeyFileError, WatermarkKey, load_key, save_key
from pmark_impl.sampling import SentenceEncoder, SentenceSampler, context_for
from pmark_impl.schemes import ChannelEvidence, DetectionResult, SentenceEvidence

#: Model-side names, imported on first access (they pull in torch / transformers).
_LAZY = {
    "split_sentences": "pmark_impl.sampling",
    "SamplingConfig": "pmark_impl.sampling",
    "Candidate": "pmark_impl.sampling",
    "LMSentenceSampler": "pmark_impl.sampling",
    "generate_many": "pmark_impl.generation",
    "Encoder": "pmark_impl.sampling",
    "load_lm": "pmark_impl.sampling",
    "load_encoder": "pmark_impl.sampling",
    "key_recovery_on_text": "pmark_impl._security",
    "Provenance": "pmark_impl.generation",
    "load_provenance": "pmark_impl.generation",
    "save_provenance": "pmark_impl.generation",
    "get_attack": "pmark_impl.attacks",
    "attack_plugins": "pmark_impl.attacks",
    "plugin": "pmark_theory.infra.plugins",
    "list_attacks": "pmark_impl.attacks",
    "attack_similarity": "pmark_impl.attacks",
    "evidence_flips": "pmark_impl.attacks",
    "perplexity": "pmark_impl.quality",
    "distinct_n": "pmark_impl.quality",
    "repetition_n": "pmark_impl.quality",
    "semantic_similarity": "pmark_impl.quality",
    "detect_many": "pmark_impl.detection",
    "decision_record": "pmark_impl.schemes",
    "QueryCounter": "pmark_impl.detection",
    "QueryStatus": "pmark_impl.detection",
    "Scheme": "pmark_impl.schemes",
    "get_scheme": "pmark_impl.schemes",
    "scheme_names": "pmark_impl.schemes",
    "KeyCalibration": "pmark_impl.keys",
    "calibrate_key": "pmark_impl.schemes",
    "key_fpr_study": "pmark_impl.schemes",
    "builtin_documents": "pmark_impl._corpus",
    "read_corpus": "pmark_impl._corpus",
    "KeyCentroids": "pmark_impl.keys",
    "fit_centroids": "pmark_impl.keys",
    "fit_key_centroids": "pmark_impl.keys",
    "detect_simmark": "pmark_impl.schemes",
    "SimMarkDetection": "pmark_impl.schemes",
    "SimMarkCalibration": "pmark_impl.schemes",
    "calibrate_simmark": "pmark_impl.schemes",
    "load_simmark_calibration": "pmark_impl.schemes",
    "save_simmark_calibration": "pmark_impl.schemes",
}


__getattr__ = lazy_getattr(__name__, _LAZY)


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
