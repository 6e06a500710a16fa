"""simulations: synthetic sentence distributions with exact laws and a sharded JAX Monte Carlo engine.

Imports only :mod:`pmark_theory` (which enables JAX float64): finite universes and cluster models with exact
laws, proxies, every scheme through the shared rules, the chunked and sharded engine, estimators, attacks in
embedding space and detection experiments.
"""

import pmark_theory as _pmark_theory
from simulations._attacks import (
    UNIT_ATOL,
    Attack,
    adversarial_attack,
    adversarial_rotation,
    attainable_change,
    cosine_similarity,
    no_attack,
    noise_attack,
    random_attack,
    random_rotation,
    word_noise,
    word_noise_cosine,
)
from simulations._cell_schemes import SEMSTAMP_MODES, ksemstamp_step, semstamp_step, simmark_step
from simulations._cluster import ClusterModel, make_cluster_model
from simulations._detection import (
    DetectionResult,
    DetectionSummary,
    PowerCurve,
    detection_experiment,
    power_curve,
    summarize_detection,
)
from simulations._detection_flips import (
    FlipCurve,
    flip_curve,
)
from simulations._detection_stats import (
    DetectionStats,
    RateCI,
    SNRSummary,
    auc,
    bernoulli_z_prime,
    bit_accuracy,
    detection_statistics,
    nominal_threshold,
    rejection_rate,
    snr_summary,
    tpr_at_fpr,
    z_prime,
)
from simulations._detection_texts import (
    Source,
    TextSample,
    make_text_simulator,
    population_medians,
    simulate_texts,
)
from simulations._engine import DEFAULT_CHUNK_SIZE, REDUCTIONS, TrialResults, run_trials
from simulations._estimators import (
    LawComparison,
    chi_square_gof,
    compare_to_law,
    empirical_law,
    merge_small_cells,
    per_cell_z,
    total_variation,
    tv_estimate,
    tv_floor,
    tv_floor_range,
    tv_null_bias,
)
from simulations._proxies import (
    Partition,
    as_partition,
    check_pivots,
    ksemstamp_partition,
    lsh_partition,
    pivot_proxies,
    random_centroids,
    random_hyperplanes,
    simmark_cosines,
)
from simulations._sampling import AliasTable, alias_law, alias_table, draw_ids
from simulations._schemes import SourceDraw, get_rule, pmark_bit_step, pmark_source_step, pmark_step
from simulations._topic_texts import TopicModel, make_topic_model, neighbour_cosine, sample_documents
from simulations._universe import (
    FiniteUniverse,
    cell_ids,
    cell_masses,
    make_finite_universe,
    make_finite_universe_from,
    make_pattern_universe,
    path_law,
    sample_ids,
    sample_paths,
    sentence_law,
    sign_pattern_ids,
    sign_pattern_masses,
)
