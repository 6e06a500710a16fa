"""Check M1 — the evaluation's statistics (CP, AUC and predicted-TPR intervals, the trend test)."""
