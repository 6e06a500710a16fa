"""The watermark key: its fields and file, fitted centroids, the proxy-centring calibration (K1).

The modules are imported by path (``pmark_impl.keys.<module>``); the public names are re-exported by
:mod:`pmark_impl`.
"""
