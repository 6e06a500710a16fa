"""pmark_theory: exact laws (NumPy/SciPy, float64) and the scheme rules (pure JAX functions).

Everything else in the toolkit (simulations, claim checks, the real-model implementation) calls these
functions; nothing here imports the rest of the toolkit. Importing the package enables JAX float64.
"""

import jax as _jax

_jax.config.update("jax_enable_x64", True)

from pmark_theory._cell_rules import (
    check_margin,
    fallback_mask,
    green_candidates,
    ksemstamp_cells,
    ksemstamp_margin_ok,
    lsh_cells,
    lsh_margin_ok,
    random_green_set,
    simmark_green,
    simmark_proxy,
)
from pmark_theory._centring import (
    CENTRING_MODES,
    centred_proxies,
    check_centring,
    context_centres,
    step_centre,
)
from pmark_theory._counts import hard_counts, nonmatch_values, soft_counts
from pmark_theory._detection import (
    calibrated_soft_pvalue,
    calibrated_soft_pvalue_bounds,
    calibrated_soft_pvalue_interval,
    calibrated_soft_z,
    hard_count_log_pvalue,
    hard_count_pvalue,
    hard_count_z,
    paper_soft_fpr,
    paper_soft_z,
    paper_soft_z_null_mean,
    randomisation_pvalue,
    soft_nonmatch_values,
    soft_null_mean,
    soft_null_var,
)
from pmark_theory._eval_stats import (
    Proportion,
    auc,
    auc_ci,
    clopper_pearson,
    critical_count,
    empirical_threshold,
    predicted_tpr,
    predicted_tpr_interval,
    proportion,
    roc_curve,
    tpr_at_alpha,
    tpr_at_empirical_fpr,
    trend_test,
)
from pmark_theory._gaussian_a import gaussian_expected_a
from pmark_theory._geometry import (
    angle_density,
    cluster_sign_pattern_probs,
    cluster_sign_prob,
    cosine_law,
    cosine_tail,
    flip_is_possible,
    haar_pivots,
    log_angle_density,
    naive_qr_pivots,
    online_bit_accuracy,
    removal_bound,
    robustness_radius,
)
from pmark_theory._hd import hd_median, hd_median_jax, hd_median_masked_jax, hd_weights
from pmark_theory._kmeans import SphericalKMeans, spherical_kmeans
from pmark_theory._offline import (
    MAX_OFFLINE_CHANNELS,
    offline_expected_samples,
    offline_factor,
    offline_literal_law,
    offline_paper_factor,
    offline_sig_and_r_factor,
    offline_sig_and_r_tv,
    offline_single_channel_positive_mass,
    offline_single_channel_tv,
    offline_tv,
)
from pmark_theory._per_key_fpr import per_key_count_pmf, per_key_fpr, per_key_fpr_law
from pmark_theory._per_key_test import (
    channel_sign_bounds,
    per_key_match_bounds,
    per_key_pvalue,
    per_key_pvalues,
    poisson_binomial_pmf,
    poisson_binomial_sf,
)
from pmark_theory._rules import (
    NEGATIVE_CONTROL_RULES,
    RULES,
    SelectionRule,
    hd_split_mask,
    median_split_mask,
    offline_literal_mask,
    offline_mask,
    offline_scores,
    offline_select,
    offline_sig_and_r_mask,
    online_mask,
    online_order_keys,
    online_order_table,
    online_select,
    online_select_ordinal,
    online_survivors,
    select_from_mask,
    signs,
)
from pmark_theory._scan import (
    ScanThreshold,
    Segment,
    Window,
    best_window,
    scan_pvalue,
    scan_pvalues,
    scan_scores,
    scan_segments,
    scan_sf,
    scan_threshold,
)
from pmark_theory._scan_lattice import as_drift, llr_drift
from pmark_theory._scan_windows import (
    MinWindow,
    bonferroni_pvalue,
    min_p_fwer,
    min_window_pvalue,
    window_pvalues,
)
from pmark_theory._seed_resampling import resampled_counts, resampling_pvalue
from pmark_theory._seeds import (
    SEEDING_MODES,
    cell_seed_bits,
    complement_frame,
    context_seed_bits,
    lsh_cell_index,
    window_means,
)
from pmark_theory._semstamp import (
    semstamp_distortion_free_condition,
    semstamp_factor,
    semstamp_is_distortion_free,
    semstamp_tv,
)
from pmark_theory._semstamp_fixed import (
    semstamp_fallback_factor,
    semstamp_fallback_factor_avg,
    semstamp_fixed_set_factor,
    semstamp_tilted_factor,
)
from pmark_theory._semstamp_margin import semstamp_margin_law
from pmark_theory._simmark import SimMarkPValues, simmark_output_law, simmark_pvalue, simmark_soft_values
from pmark_theory._snr import hard_count_power, snr_bounds, snr_moments
from pmark_theory._soft_tail import EXACT_ENUMERATION_MAX_BITS
from pmark_theory._validate import PMarkValueError
from pmark_theory.infra.plugins import PluginError, plugin

__version__ = "0.1.0"
