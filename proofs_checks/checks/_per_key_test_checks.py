"""Check K2 — the per-key test under the dependence of context centring."""
