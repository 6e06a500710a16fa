"""Attacks on real text: plain functions ``attack(text, rng) -> text`` in a registry, and their diagnostics.

Word level (``word-delete``, ``word-substitute`` with WordNet 3.0), cross-sentence (``sentence-delete``,
``sentence-insert``, ``sentence-swap``, ``sentence-merge``, ``sentence-split``, ``copy-paste``) and paraphrase by an
instruct LM (``paraphrase-sentence``, ``paraphrase-document``); user attacks are plug-ins, registered with
``@plugin("attack")`` (named ``"module:function"``) or an entry point in the group ``pmark.attacks``. The
diagnostics give C11's η (:func:`attack_similarity`) and C14's empirical ε_rm (:func:`evidence_flips`). See
docs/attacks.md.
"""

from __future__ import annotations

from pmark_impl.attacks._diagnostics import AttackSimilarity, EvidenceFlips, attack_similarity, evidence_flips
from pmark_impl.attacks._lexicon import Lexicon, TableLexicon, WordNetLexicon, default_lexicon, wordnet_folder
from pmark_impl.attacks._params import collect_params, parse_param_value, show, value_key
from pmark_impl.attacks._paraphrase import (
    DOCUMENT_TEMPLATE,
    SENTENCE_TEMPLATE,
    Paraphraser,
    bigram_overlap,
    paraphrase_document,
    paraphrase_sentence,
    select_by_bigram_overlap,
)
from pmark_impl.attacks._registry import (
    Attack,
    AttackFn,
    AttackSpec,
    attack_plugins,
    check_rate,
    get_attack,
    list_attacks,
    register_attack,
)
from pmark_impl.attacks._sentence import (
    copy_paste,
    sentence_delete,
    sentence_insert,
    sentence_merge,
    sentence_split,
    sentence_swap,
)
from pmark_impl.attacks._word import STOP_WORDS, substitutable_mask, word_delete, word_substitute
from pmark_theory.infra.plugins import plugin

__all__ = [
    "DOCUMENT_TEMPLATE",
    "SENTENCE_TEMPLATE",
    "STOP_WORDS",
    "Attack",
    "AttackFn",
    "AttackSimilarity",
    "AttackSpec",
    "EvidenceFlips",
    "Lexicon",
    "Paraphraser",
    "TableLexicon",
    "WordNetLexicon",
    "attack_plugins",
    "attack_similarity",
    "bigram_overlap",
    "check_rate",
    "collect_params",
    "copy_paste",
    "default_lexicon",
    "evidence_flips",
    "get_attack",
    "list_attacks",
    "paraphrase_document",
    "paraphrase_sentence",
    "parse_param_value",
    "plugin",
    "register_attack",
    "select_by_bigram_overlap",
    "sentence_delete",
    "sentence_insert",
    "sentence_merge",
    "sentence_split",
    "sentence_swap",
    "show",
    "substitutable_mask",
    "value_key",
    "word_delete",
    "word_substitute",
    "wordnet_folder",
]
