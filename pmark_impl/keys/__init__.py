"""The watermark key — layer 3 of ``pmark_impl`` (see ``docs/architecture.md``, "Layers").

The key's fields and their checks (:mod:`._key_fields`, :mod:`._key_meaning`), the key itself
(:class:`WatermarkKey`, :mod:`._keys`) and its file (:func:`load_key`, :func:`save_key`, :mod:`._key_files`), and
what calibration stores in it: the proxy centring and per-key null (K1, :mod:`._calibration`), the SemStamp cell
masses (:mod:`._cell_calibration`), fitted centroids (:mod:`._centroids`) and the text-level nulls (K3,
:mod:`._text_nulls`). The fitting that needs a detector lives above, with the scheme that owns it
(:mod:`pmark_impl.schemes`).

Other units import these names from here (``from pmark_impl.keys import load_key``), never from the modules.
"""

from __future__ import annotations

from pmark_impl.keys._calibration import (
    DEFAULT_CENTRING,
    DEFAULT_CONFIDENCE,
    DEFAULT_TEXT_SENTENCES,
    KeyCalibration,
    band_sign_counts,
    centred_text_proxies,
    sign_counts,
)
from pmark_impl.keys._cell_calibration import (
    CellCalibration,
    cell_map_digest,
    count_cells,
)
from pmark_impl.keys._centroids import (
    DEFAULT_N_CLUSTERS,
    KeyCentroids,
    centroid_corpus,
    fit_centroids,
    fit_key_centroids,
)
from pmark_impl.keys._key_files import load_key, save_key
from pmark_impl.keys._keys import (
    KEY_FORMAT,
    MAX_KEY_CHANNELS,
    MAX_KEY_DIM,
    MAX_SEED_WINDOW,
    KeyFileError,
    WatermarkKey,
    check_key,
    check_key_shape,
)
from pmark_impl.keys._text_nulls import MAX_NULL_LENGTH, MAX_NULL_TEXTS, KeyTextNull

__all__ = [
    "DEFAULT_CENTRING",
    "DEFAULT_CONFIDENCE",
    "DEFAULT_N_CLUSTERS",
    "DEFAULT_TEXT_SENTENCES",
    "KEY_FORMAT",
    "MAX_KEY_CHANNELS",
    "MAX_KEY_DIM",
    "MAX_NULL_LENGTH",
    "MAX_NULL_TEXTS",
    "MAX_SEED_WINDOW",
    "CellCalibration",
    "KeyCalibration",
    "KeyCentroids",
    "KeyFileError",
    "KeyTextNull",
    "WatermarkKey",
    "band_sign_counts",
    "cell_map_digest",
    "centred_text_proxies",
    "centroid_corpus",
    "check_key",
    "check_key_shape",
    "count_cells",
    "fit_centroids",
    "fit_key_centroids",
    "load_key",
    "save_key",
    "sign_counts",
]
