"""Which tokens can end a row: the stopping rule's batched pre-test (issue 40).

A row of the sampler stops at EOS, at the token cap, or as soon as its decoded text holds a sentence boundary (a
run of ``. ! ?`` followed by whitespace or the end of the text: :mod:`pmark_impl.sampling._segment`). Applying that
rule means decoding the row's tokens, one row at a time in Python. :func:`may_end_table` marks, once per tokenizer,
the tokens after which the rule *can* say "stop"; a row whose new token is unmarked and below the cap goes on
without being decoded, and only marked rows go through the exact rule
(:meth:`~pmark_impl.sampling._sampler.LMSentenceSampler._advance_window`). So the batched engine's token loop does
no per-row Python for most rows and stops every row exactly where the exact rule stops it.

**Why an unmarked token cannot end a row.** Before the token, the row's text has no boundary (else it would have
stopped); in particular it does not end with a mark (a mark at the end of the text is a boundary). A new boundary
needs a mark followed by whitespace or the end. A token is marked when its own decoded text contains a terminal
mark or U+FFFD (a piece of a UTF-8 character whose completion could be anything, whitespace included), when it is
an EOS id, or when the tokenizer cannot decode it alone. An unmarked token only appends characters that are not
marks and leaves the characters before it as they were, so every mark of the new text is an old one, followed by
the same non-space character as before: no boundary. This holds for tokenizers whose decoding concatenates the
tokens' texts up to whitespace handling at the start and spaces the cleanup removes *before* punctuation —
byte-level BPE (GPT-2, SmolLM2, Llama 3, Qwen), SentencePiece with byte fallback (Llama 2, Mistral) and WordPiece
(the tiny LM). Checked on random rows of the tiny LM and of SmolLM2's tokenizer against the exact rule
(``tests/pmark_impl/test_stops.py``), and on every engine test, whose texts must equal ``generate``'s (which
applies the exact rule to every row at every token).
"""

from __future__ import annotations

from typing import Any

import torch

from pmark_impl.sampling._segment import TERMINAL_MARKS

__all__ = ["may_end_table"]

_SUSPECT = frozenset(TERMINAL_MARKS + "\ufffd")


def may_end_table(tokenizer: Any, eos_ids: frozenset[int], vocab_size: int) -> torch.Tensor:
    """``[vocab_size]`` bool on the CPU: ``True`` for the tokens after which a row may stop (module docstring).

    Args:
      tokenizer: the sampler's tokenizer (``decode``, or ``batch_decode`` when it has one).
      eos_ids: the sampler's EOS ids (always marked).
      vocab_size: the width of the model's logits (ids the tokenizer does not know are marked).

    Returns:
      The table; index it with sampled token ids.
    """
    ids = [[i] for i in range(vocab_size)]
    try:
        texts = tokenizer.batch_decode(ids, skip_special_tokens=True)
    except Exception:  # a tokenizer that refuses some id: decode one at a time, mark what fails
        texts = []
        for one in ids:
            try:
                texts.append(tokenizer.decode(one, skip_special_tokens=True))
            except Exception:
                texts.append(None)
    table = torch.tensor(
        [t is None or not isinstance(t, str) or not _SUSPECT.isdisjoint(t) for t in texts], dtype=torch.bool
    )
    known = getattr(tokenizer, "__len__", None)
    if callable(known) and len(tokenizer) < vocab_size:
        table[len(tokenizer) :] = True
    for e in eos_ids:
        if 0 <= e < vocab_size:
            table[e] = True
    return table
