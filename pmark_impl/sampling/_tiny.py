"""A tiny causal LM whose sentence law can be enumerated exactly (tests and demos without a hub).

:func:`make_tiny_lm` builds a 2-layer Llama with random weights (hidden size 32) over a word-level vocabulary trained
offline by ``tokenizers`` on an embedded corpus: five words, the terminal marks ``. ! ?`` and the specials
``<eos> <bos> <unk> <pad>``. The output layer has a bias: ``end_bias`` on ``. ! ?`` and ``<eos>`` (so sentences
end within a few tokens) and ``-inf`` on ``<bos> <unk> <pad>`` (never sampled). With a cap of a few tokens the
sampler's sentence space has a few hundred outcomes, and :func:`enumerate_sentences` gives its exact law.

Options for tests that need a large sentence space rather than an enumerable one (e.g. power on multi-sentence
texts): ``corpus=`` trains the tokenizer on other texts (a larger word vocabulary; it must contain ``. ! ?``), and
``eos_bias=`` sets the ``<eos>`` bias apart from the marks' (``-inf``: a sentence never ends the text). The
defaults reproduce the model above exactly.

Everything is seeded by ``seed`` through a ``torch.Generator`` (no global seeding); the weights are float64 so that
the enumeration and :meth:`~pmark_impl.sampling._sampler.LMSentenceSampler.sentence_logprob` agree to ~1e-12.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from pmark_impl.sampling._sampler import LMSentenceSampler, SamplingConfig
from pmark_theory._validate import PMarkValueError, check_positive_int

__all__ = ["TINY_CORPUS", "TINY_SPECIALS", "enumerate_sentences", "make_tiny_lm", "make_tiny_tokenizer"]

#: The embedded training corpus of the tiny tokenizer: its words and marks are the whole vocabulary.
TINY_CORPUS = (
    "the cat sat.",
    "the dog sat!",
    "cat sat?",
    "the dog. a cat.",
)
#: Special tokens, in id order (``<eos>`` is id 0).
TINY_SPECIALS = ("<eos>", "<bos>", "<unk>", "<pad>")
_MARKS = (".", "!", "?")


def make_tiny_tokenizer(corpus: Sequence[str] | None = None) -> Any:
    """A word-level ``PreTrainedTokenizerFast`` trained offline on :data:`TINY_CORPUS` (or ``corpus``).

    Whitespace pre-tokenizer (words and punctuation runs), WordPiece decoder with cleanup (``"cat ."`` decodes to
    ``"cat."``). Unknown words map to ``<unk>``; nothing is added around an encoding.

    Args:
      corpus: training texts; their words and punctuation runs are the vocabulary (default :data:`TINY_CORPUS`).

    Returns:
      The tokenizer, with ``eos_token="<eos>"``, ``bos_token="<bos>"``, ``unk_token``, ``pad_token`` set.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.WordPiece(cleanup=True)
    corpus = _check_corpus(corpus)
    tok.train_from_iterator(corpus, trainers.WordLevelTrainer(special_tokens=list(TINY_SPECIALS)))
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<eos>",
        bos_token="<bos>",
        unk_token="<unk>",
        pad_token="<pad>",
        clean_up_tokenization_spaces=False,
    )


def _check_corpus(corpus: Sequence[str] | None) -> list[str]:
    if corpus is None:
        return list(TINY_CORPUS)
    if isinstance(corpus, str) or not isinstance(corpus, Sequence) or not corpus:
        raise PMarkValueError("corpus must be a non-empty list of str")
    for i, text in enumerate(corpus):
        if not isinstance(text, str):
            raise PMarkValueError(f"corpus[{i}] must be a str, got {type(text).__name__}")
    return list(corpus)


@torch.no_grad()
def make_tiny_lm(
    seed: int = 0,
    *,
    hidden_size: int = 32,
    num_layers: int = 2,
    logit_scale: float = 2.0,
    end_bias: float = 0.5,
    dtype: torch.dtype = torch.float64,
    corpus: Sequence[str] | None = None,
    eos_bias: float | None = None,
) -> tuple[Any, Any]:
    """A tiny Llama with random weights and a biased output layer, with its word-level tokenizer.

    Args:
      seed: seeds a ``torch.Generator`` that draws every weight (no global RNG).
      hidden_size: model width (4 heads, 2 key/value heads).
      num_layers: decoder layers.
      logit_scale: standard deviation of the random logits (output weights ~ N(0, logit_scale² / hidden_size) on
        RMS-normalised states): larger = peakier, context-dependent next-token laws.
      end_bias: bias added to the logits of ``. ! ?`` and ``<eos>``; ``-inf`` gives a model that never ends a
        sentence (every row stops at the cap).
      dtype: parameter dtype (float64 for exact enumeration).
      corpus: tokenizer training texts (default :data:`TINY_CORPUS`); must contain the marks ``. ! ?``.
      eos_bias: bias on ``<eos>`` (default ``end_bias``); ``-inf`` gives texts that never end before the
        sentence limit (every candidate ends at a mark or at the cap).

    Returns:
      ``(model, tokenizer)``; the model is in eval mode.

    Raises:
      PMarkValueError: ``corpus`` is empty, holds a non-string, or lacks one of ``. ! ?``.
    """
    from transformers import LlamaConfig, LlamaForCausalLM

    seed = check_positive_int("seed", seed, minimum=0)
    tokenizer = make_tiny_tokenizer(corpus)
    vocab = len(tokenizer)
    missing = [t for t in _MARKS if t not in tokenizer.get_vocab()]
    if missing:
        raise PMarkValueError(f"corpus must contain the terminal marks . ! ? (missing {' '.join(missing)})")
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    config._attn_implementation = "eager"
    model = LlamaForCausalLM(config)
    model.lm_head = torch.nn.Linear(hidden_size, vocab, bias=True)
    model.to(dtype)

    gen = torch.Generator().manual_seed(seed)
    for name, p in model.named_parameters():
        if name.endswith("norm.weight"):
            p.fill_(1.0)
        elif name == "lm_head.bias":
            continue
        elif name == "lm_head.weight":
            p.copy_(
                torch.randn(p.shape, generator=gen, dtype=torch.float64)
                * logit_scale
                / math.sqrt(hidden_size)
            )
        elif name == "model.embed_tokens.weight":
            p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64))
        else:  # projections: variance-preserving N(0, 1/fan_in)
            p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) / math.sqrt(p.shape[1]))
    bias = torch.zeros(vocab, dtype=torch.float64)
    for t in _MARKS:
        bias[tokenizer.convert_tokens_to_ids(t)] = end_bias
    bias[tokenizer.convert_tokens_to_ids("<eos>")] = end_bias if eos_bias is None else eos_bias
    for t in TINY_SPECIALS[1:]:
        bias[tokenizer.convert_tokens_to_ids(t)] = -math.inf
    model.lm_head.bias.copy_(bias)
    model.eval()
    return model, tokenizer


@torch.inference_mode()
def enumerate_sentences(
    model: Any, tokenizer: Any, context: str, config: SamplingConfig, *, max_paths: int = 200_000
) -> tuple[list[str], np.ndarray]:
    """Exact law of ``LMSentenceSampler(model, tokenizer, config).sample(context, 1, ·)[0].text``.

    Breadth-first over token paths: at depth ``k`` all live prefixes are scored in one batched forward pass of
    the full sequence (no KV cache, unlike the sampler), every token of positive probability under ``config``
    extends a prefix, and the sampler's own stopping rule decides whether the row ends (boundary, EOS, cap) and
    with which text. Probabilities of paths with the same text are added. Capped outcomes are included.

    Args:
      model: a causal LM (typically from :func:`make_tiny_lm`).
      tokenizer: its tokenizer.
      context: the text so far.
      config: the sampler's configuration; ``max_sentence_tokens`` bounds the depth.
      max_paths: refuse to enumerate more live prefixes than this.

    Returns:
      ``(texts, probs)``: distinct texts sorted, and their probabilities ``[len(texts)]`` float64 summing to 1.

    Raises:
      PMarkValueError: the enumeration needs more than ``max_paths`` prefixes.
    """
    max_paths = check_positive_int("max_paths", max_paths)
    sampler = LMSentenceSampler(model, tokenizer, config)
    ctx = sampler._context_ids(context)
    mass: dict[str, float] = {}
    prefixes: list[list[int]] = [[]]
    logps = [0.0]
    while prefixes:
        if len(prefixes) > max_paths:
            raise PMarkValueError(f"max_paths = {max_paths} exceeded ({len(prefixes)} live prefixes)")
        batch = torch.cat(
            [ctx.expand(len(prefixes), -1), torch.tensor(prefixes, dtype=torch.long, device=ctx.device)],
            dim=1,
        )
        step = sampler._logprobs(model(input_ids=batch).logits[:, -1, :]).cpu().numpy()
        new_prefixes, new_logps = [], []
        for prefix, base, row in zip(prefixes, logps, step):
            for tok in np.flatnonzero(np.isfinite(row)).tolist():
                ids = list(prefix)
                outcome, text = sampler._advance(ids, tok)
                lp = base + float(row[tok])
                if outcome is None:
                    new_prefixes.append(ids)
                    new_logps.append(lp)
                else:
                    mass[text] = mass.get(text, 0.0) + math.exp(lp)
        prefixes, logps = new_prefixes, new_logps
    texts = sorted(mass)
    return texts, np.array([mass[t] for t in texts], dtype=np.float64)
