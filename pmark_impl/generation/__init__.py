"""Watermarked generation with any scheme, its records and their provenance.

The modules are imported by path (``pmark_impl.generation.<module>``); the public names are re-exported by
:mod:`pmark_impl`.
"""
