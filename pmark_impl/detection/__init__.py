"""Detection of a text: results, exact statistics, which test runs, the bounded slow part (X3, X4, K1, Z3).

The modules are imported by path (``pmark_impl.detection.<module>``); the public names are re-exported by
:mod:`pmark_impl`.
"""
