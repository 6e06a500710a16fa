"""Paraphrase attacks by an instruct LM, sentence by sentence or the whole document (C11's η, C14's ε on text).

The paraphraser fills a prompt template with the text, wraps it in the tokenizer's chat template when it has one
(SmolLM2-135M-Instruct does; the tiny test LM does not), and samples ``n_candidates`` continuations in ONE batched
decoding loop (shared prefill, KV cache repeated), each row ending at EOS or after ``max_new_tokens`` tokens.
Sampling: ``softmax(top_p(logits / temperature))`` (the sampler's own warper, :func:`~pmark_impl.sampling._sampler.
filtered_logprobs`), randomness from a ``torch.Generator`` seeded by ``rng`` only, so the attack is deterministic
given ``rng``. The reply is cleaned: leading preamble lines ending with ``:`` are dropped; at sentence level the
first line is kept, the quoted part of ``'Here is a version: "…"'`` taken (or leading labels such as ``"Sentence: "``
removed), and only its first sentence kept (small
instruct models append explanations); at document level the lines are joined. Whitespace is normalised and one
pair of enclosing quotes removed. An empty reply keeps the source.

Choice among candidates: the first one, or with ``bigram_filter=True`` the rule of SemStamp's reference code
(``accept_by_bigram_overlap``): bigrams of token ids (the paraphraser's tokenizer, no special tokens); the overlap
of a candidate is the sum, over the source's distinct bigrams that the candidate also has, of their counts in the
source; a candidate is accepted if its overlap is smaller than the best so far (initially the source's token
count) and it has at most 1.5 times the source's tokens; if none is accepted, the first candidate is used.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pmark_impl.attacks._params import (
    check_bool,
    check_int_in,
    check_optional_str,
    check_real_in,
    check_template,
    show,
)
from pmark_impl.attacks._table import AttackFn, register_attack
from pmark_impl.sampling import normalize_whitespace, split_sentences
from pmark_theory._validate import PMarkValueError

__all__ = [
    "DOCUMENT_TEMPLATE",
    "SENTENCE_TEMPLATE",
    "Paraphraser",
    "bigram_overlap",
    "paraphrase_document",
    "paraphrase_sentence",
    "select_by_bigram_overlap",
]

#: Default sentence-level instruction (``{text}`` is the sentence).
SENTENCE_TEMPLATE = (
    "Paraphrase the following sentence. Keep its meaning but use different words. "
    "Reply with the paraphrased sentence only.\n\nSentence: {text}"
)
#: Default document-level instruction (``{text}`` is the whole text).
DOCUMENT_TEMPLATE = (
    "Paraphrase the following text. Keep its meaning and every fact but use different words. "
    "Reply with the paraphrased text only.\n\nText: {text}"
)
#: Bounds on the batch: ``n_candidates`` rows of at most ``max_new_tokens`` tokens share one KV cache (SmolLM2-135M
#: in float32: ~46 kB per token and row, so the largest batch holds ~12 GB).
MAX_NEW_TOKENS = 4096
MAX_CANDIDATES = 64
_QUOTES = re.compile(r'^(["\'“])(.*)(["\'”])$')
_LABELS = re.compile(r"^(?:[A-Za-z]{1,12}:\s+)+")  # "A: Sentence: ..." -> "..."
_PREAMBLE_QUOTE = re.compile(r'^[^"“]*:\s*["“](.+?)["”]')


def _bigrams(ids: Sequence[int]) -> list[tuple[int, int]]:
    return [(ids[i], ids[i + 1]) for i in range(len(ids) - 1)]


def bigram_overlap(source_ids: Sequence[int], candidate_ids: Sequence[int]) -> int:
    """SemStamp's overlap: ``sum_{g in B(source) ∩ B(candidate)} count_source(g)`` over token-id bigrams ``B``."""
    src, cand = Counter(_bigrams(source_ids)), Counter(_bigrams(candidate_ids))
    return sum(src[g] for g in src.keys() & cand.keys())


def select_by_bigram_overlap(source_ids: Sequence[int], candidates_ids: Sequence[Sequence[int]]) -> int:
    """Index of the candidate chosen by SemStamp's ``accept_by_bigram_overlap`` (see the module docstring)."""
    best, chosen = len(source_ids), 0
    for i, ids in enumerate(candidates_ids):
        ov = bigram_overlap(source_ids, ids)
        if ov < best and len(ids) <= 1.5 * len(source_ids):
            best, chosen = ov, i
    return chosen


@dataclass
class Paraphraser:
    """An instruct LM that rewrites a text (see the module docstring).

    Attributes:
      model: a causal LM (eval mode).
      tokenizer: its tokenizer.
      template: instruction with a ``{text}`` field.
      temperature: sampling temperature ``> 0``.
      top_p: nucleus mass in ``(0, 1]``.
      max_new_tokens: cap on reply tokens.
      n_candidates: replies sampled per text (``k``).
      bigram_filter: choose the reply with SemStamp's bigram-overlap rule instead of the first one.
      level: ``"sentence"`` (keep the first line of the reply) or ``"document"`` (keep the whole reply).
      chat: wrap the prompt in the chat template (default: iff the tokenizer has one).
    """

    model: Any
    tokenizer: Any
    template: str = SENTENCE_TEMPLATE
    temperature: float = 0.7
    top_p: float = 0.95
    max_new_tokens: int = 64
    n_candidates: int = 1
    bigram_filter: bool = False
    level: str = "sentence"
    chat: bool | None = None

    def __post_init__(self) -> None:
        from pmark_impl.sampling import SamplingConfig

        _check_model(self.model)
        _check_tokenizer(self.tokenizer)
        if self.level not in ("sentence", "document"):
            raise PMarkValueError(f"level must be 'sentence' or 'document', got {show(self.level)}")
        settings = _check_settings(
            self.template,
            self.temperature,
            self.top_p,
            self.max_new_tokens,
            self.n_candidates,
            self.bigram_filter,
        )
        self.template, self.temperature, self.top_p, self.max_new_tokens, self.n_candidates = settings[:5]
        self.bigram_filter = settings[5]
        if self.chat is not None:
            self.chat = check_bool("chat", self.chat)
        self._config = SamplingConfig(temperature=self.temperature, top_p=self.top_p, top_k=0)
        if self.chat is None:
            self.chat = bool(getattr(self.tokenizer, "chat_template", None))
        eos = self.tokenizer.eos_token_id
        if isinstance(eos, (list, tuple, set)) and all(isinstance(e, int) for e in eos):
            self._stop = set(eos)
        elif isinstance(eos, int) or eos is None:
            self._stop = set() if eos is None else {eos}
        else:
            raise PMarkValueError(
                f"tokenizer.eos_token_id must be an int, a list of ints or None, got {show(eos)}"
            )

    def _prompt_ids(self, text: str) -> list[int]:
        content = self.template.format(text=text)
        if self.chat:
            ids = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": content}], add_generation_prompt=True, tokenize=True
            )
            ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
            return [int(i) for i in ids]
        return list(self.tokenizer(content + "\n", add_special_tokens=False).input_ids)

    def _clean(self, reply: str) -> str:
        lines = [ln.strip() for ln in reply.splitlines() if ln.strip()]
        while len(lines) > 1 and lines[0].endswith(":"):  # a preamble such as "Here is the paraphrase:"
            lines = lines[1:]
        if self.level == "sentence":
            line = lines[0] if lines else ""
            quoted = _PREAMBLE_QUOTE.match(line)  # 'Here is a version: "..."' -> the quoted sentence
            line = quoted.group(1) if quoted else _LABELS.sub("", line)
            sents = split_sentences(line)
            reply = sents[0] if sents else ""
        else:
            reply = " ".join(lines)
        reply = normalize_whitespace(reply)
        m = _QUOTES.match(reply)
        return normalize_whitespace(m.group(2)) if m else reply

    def candidates(self, text: str, generator: Any) -> list[str]:
        """``n_candidates`` cleaned replies for ``text``, sampled in one batch with ``generator``."""
        import torch

        from pmark_impl.sampling import cache_keyword, filtered_logprobs, returned_cache

        k = self.n_candidates
        device = next(self.model.parameters()).device
        ids = torch.tensor([self._prompt_ids(text)], dtype=torch.long, device=device)
        rows: list[list[int]] = [[] for _ in range(k)]
        with torch.inference_mode():
            kw = cache_keyword(self.model)  # transformers 5.x: ``cache`` (the old name warns on every call)
            out = self.model(input_ids=ids, use_cache=True, logits_to_keep=1)
            cache = returned_cache(out, kw)
            cache.batch_repeat_interleave(k)
            logits = out.logits[:, -1, :].expand(k, -1)
            active = list(range(k))
            for _ in range(self.max_new_tokens):
                probs = filtered_logprobs(logits, self._config).exp_()
                tokens = torch.multinomial(probs, 1, generator=generator).squeeze(1)
                keep = []
                for j, (r, tok) in enumerate(zip(active, tokens.tolist())):
                    if tok in self._stop:
                        continue
                    rows[r].append(tok)
                    keep.append(j)
                if not keep:
                    break
                if len(keep) < len(active):
                    index = torch.tensor(keep, dtype=torch.long, device=device)
                    cache.batch_select_indices(index)
                    tokens = tokens[index]
                    active = [active[j] for j in keep]
                out = self.model(input_ids=tokens[:, None], use_cache=True, **{kw: cache})
                logits, cache = out.logits[:, -1, :], returned_cache(out, kw)
        return [self._clean(self.tokenizer.decode(r, skip_special_tokens=True)) for r in rows]

    def rewrite(self, text: str, rng: np.random.Generator) -> str:
        """One paraphrase of ``text`` (the source itself if every reply is empty)."""
        import torch

        device = next(self.model.parameters()).device
        gen = torch.Generator(device=device).manual_seed(int(rng.integers(2**63)))
        cands = [c for c in self.candidates(text, gen) if c]
        if not cands:
            return normalize_whitespace(text)
        if not self.bigram_filter or len(cands) == 1:
            return cands[0]
        enc = self.tokenizer
        src = enc(text, add_special_tokens=False).input_ids
        return cands[
            select_by_bigram_overlap(src, [enc(c, add_special_tokens=False).input_ids for c in cands])
        ]


def _check_model(model: Any) -> None:
    """A loaded LM, by duck type (a JSON value from the command line is never one)."""
    if not callable(model) or not callable(getattr(model, "parameters", None)):
        raise PMarkValueError(
            f"model must be a loaded causal LM (a torch module), got {show(model)}; "
            "name one with model_name= to load it"
        )


def _check_tokenizer(tokenizer: Any) -> None:
    """A loaded tokenizer, by duck type."""
    if (
        not callable(tokenizer)
        or not callable(getattr(tokenizer, "decode", None))
        or not hasattr(tokenizer, "eos_token_id")
    ):
        raise PMarkValueError(
            "tokenizer must be the model's loaded tokenizer (with decode and eos_token_id), "
            f"got {show(tokenizer)}; "
            "name the model with model_name= to load both"
        )


def _check_settings(
    template: Any, temperature: Any, top_p: Any, max_new_tokens: Any, n_candidates: Any, bigram_filter: Any
) -> tuple[str, float, float, int, int, bool]:
    """Every sampling setting checked (type and range), before any model is loaded."""
    return (
        check_template("template", template),
        check_real_in("temperature", temperature, 0.0, math.inf, open_lo=True, open_hi=True),
        check_real_in("top_p", top_p, 0.0, 1.0, open_lo=True),
        check_int_in("max_new_tokens", max_new_tokens, 1, MAX_NEW_TOKENS),
        check_int_in("n_candidates", n_candidates, 1, MAX_CANDIDATES),
        check_bool("bigram_filter", bigram_filter),
    )


def _make(level: str, model, tokenizer, model_name, **kw) -> Paraphraser:
    """Check every parameter, then load the model (if not given) and build the :class:`Paraphraser`."""
    if kw.get("template") is None:
        kw["template"] = SENTENCE_TEMPLATE if level == "sentence" else DOCUMENT_TEMPLATE
    _check_settings(**kw)
    model_name = check_optional_str("model_name", model_name)
    if model is not None:
        _check_model(model)
    if tokenizer is not None:
        _check_tokenizer(tokenizer)
    if (model is None) != (tokenizer is None):
        raise PMarkValueError("pass model and tokenizer together (or neither, to load model_name)")
    if model is not None and model_name is not None:
        raise PMarkValueError("pass model and tokenizer, or model_name, not both")
    if model is None:
        from pmark_impl.sampling import load_lm

        model, tokenizer = load_lm(model_name)
    return Paraphraser(model, tokenizer, level=level, **kw)


_PARAMS = {
    "model": None,
    "tokenizer": None,
    "model_name": None,
    "template": None,
    "temperature": 0.7,
    "top_p": 0.95,
    "max_new_tokens": None,
    "n_candidates": 1,
    "bigram_filter": False,
}


@register_attack(
    "paraphrase-sentence",
    description="paraphrase each sentence with an instruct LM (default SmolLM2-135M-Instruct)",
    params=_PARAMS,
)
def paraphrase_sentence(
    model: Any = None,
    tokenizer: Any = None,
    model_name: str | None = None,
    template: str | None = None,
    temperature: float = 0.7,
    top_p: float = 0.95,
    max_new_tokens: int | None = None,
    n_candidates: int = 1,
    bigram_filter: bool = False,
) -> AttackFn:
    """Sentence-level paraphrase: every sentence (``split_sentences``) is rewritten on its own, then joined.

    Args:
      model, tokenizer: a loaded instruct LM (default: ``load_lm(model_name)``, SmolLM2 when ``None``).
      model_name: any id for :func:`~pmark_impl.sampling._models.load_lm` when ``model`` is not given.
      template: instruction with ``{text}`` (default :data:`SENTENCE_TEMPLATE`).
      temperature, top_p: sampling (``top_k`` off).
      max_new_tokens: reply cap (default 64).
      n_candidates: replies per sentence ``k``.
      bigram_filter: choose among the ``k`` by SemStamp's bigram-overlap rule.

    Returns:
      ``attack(text, rng)``.
    """
    p = _make(
        "sentence", model, tokenizer, model_name, template=template, temperature=temperature, top_p=top_p,
        max_new_tokens=64 if max_new_tokens is None else max_new_tokens, n_candidates=n_candidates,
        bigram_filter=bigram_filter,
    )  # fmt: skip

    def attack(text: str, rng: np.random.Generator) -> str:
        return " ".join(p.rewrite(s, rng) for s in split_sentences(text))

    return attack


@register_attack(
    "paraphrase-document",
    description="paraphrase the whole text at once with an instruct LM (default SmolLM2-135M-Instruct)",
    params=_PARAMS,
)
def paraphrase_document(
    model: Any = None,
    tokenizer: Any = None,
    model_name: str | None = None,
    template: str | None = None,
    temperature: float = 0.7,
    top_p: float = 0.95,
    max_new_tokens: int | None = None,
    n_candidates: int = 1,
    bigram_filter: bool = False,
) -> AttackFn:
    """Document-level paraphrase: the whole text in one prompt (default :data:`DOCUMENT_TEMPLATE`, cap 512
    tokens); other arguments as :func:`paraphrase_sentence`."""
    p = _make(
        "document", model, tokenizer, model_name, template=template, temperature=temperature, top_p=top_p,
        max_new_tokens=512 if max_new_tokens is None else max_new_tokens, n_candidates=n_candidates,
        bigram_filter=bigram_filter,
    )  # fmt: skip

    def attack(text: str, rng: np.random.Generator) -> str:
        return p.rewrite(normalize_whitespace(text), rng)

    return attack
