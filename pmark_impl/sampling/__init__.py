"""The language model and encoder side: candidate sentences, the token law, the tiny enumerable LM, loaders, sentence splitting, shared plumbing.

The modules are imported by path (``pmark_impl.sampling.<module>``); the public names are re-exported by
:mod:`pmark_impl`.
"""
