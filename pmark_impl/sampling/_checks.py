"""Type checks at the public API boundary of generation and detection: one line naming the argument.

A wrong type given to :func:`pmark_impl.generate`, :func:`pmark_impl.detect` and their siblings used to surface as
a raw ``AttributeError``/``TypeError`` from deep inside, or worse as a silently wrong answer (``bytes`` scored
byte by byte, a ``None`` sentence scored as the text ``'None'``). Each check here raises
:class:`~pmark_theory._validate.PMarkValueError` with the argument's name, the type expected and the type given.

Messages show the *type* of what was given and, for ``None``, numbers and booleans, its value; never the content
of a string or bytes (it may be a long text, or a secret passed by mistake).
"""

from __future__ import annotations

import itertools
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence, Set, Sized
from typing import Any

from pmark_theory._validate import PMarkValueError, check_size

__all__ = [
    "check_callable",
    "check_candidates",
    "check_encoder",
    "check_number",
    "check_sampler",
    "check_seed",
    "check_sentences",
    "check_str",
    "check_text",
    "check_texts",
    "describe",
    "split_text",
]


def describe(x: Any) -> str:
    """What was given, for a message: ``None``, ``int 5``, ``float nan``, ``bool True``, else the type's name."""
    if x is None:
        return "None"
    if isinstance(x, (bool, int, float, complex)):
        text = repr(x)
        return f"{type(x).__name__} {text if len(text) <= 40 else text[:37] + '...'}"
    return type(x).__name__


def _fail(name: str, expected: str, x: Any, hint: str = "") -> PMarkValueError:
    return PMarkValueError(f"{name} must be {expected}, got {describe(x)}{hint}")


def check_encoder(encoder: Any, dim: int | None = None, key_encoder: str | None = None) -> Any:
    """``encoder`` if it has an integer ``dim`` (equal to ``dim`` when given) and a callable ``encode``."""
    enc_dim = getattr(encoder, "dim", None)
    if (
        not callable(getattr(encoder, "encode", None))
        or isinstance(enc_dim, bool)
        or not isinstance(enc_dim, numbers.Integral)
    ):
        raise _fail("encoder", "a SentenceEncoder (an integer .dim and .encode(texts) -> [n, dim])", encoder)
    if dim is not None and int(enc_dim) != dim:
        raise PMarkValueError(
            f"encoder dimension {enc_dim} differs from the key's dimension {dim}"
            + (f" (the key was made for encoder {key_encoder!r})" if key_encoder is not None else "")
        )
    return encoder


def check_sampler(sampler: Any, why: str = "") -> Any:
    """``sampler`` if it has a callable ``sample(context, n, generator)``."""
    if not callable(getattr(sampler, "sample", None)):
        raise _fail("sampler", f"a SentenceSampler (with .sample(context, n, generator)){why}", sampler)
    return sampler


def check_callable(name: str, fn: Any, *, optional: bool = True) -> Any:
    """``fn`` if it is callable (or ``None`` when ``optional``)."""
    if (fn is None and optional) or callable(fn):
        return fn
    raise _fail(name, "a callable" + (" or None" if optional else ""), fn)


def check_str(name: str, x: Any, *, optional: bool = False) -> Any:
    """``x`` if it is a ``str`` (or ``None`` when ``optional``)."""
    if isinstance(x, str) or (x is None and optional):
        return x
    raise _fail(name, "a string" + (" or None" if optional else ""), x)


def check_number(name: str, x: Any) -> Any:
    """``x`` if it is a real number (``int``, ``float``, NumPy scalars); ``bool`` and strings are refused."""
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise _fail(name, "a real number", x)
    return x


#: Largest seed: what a provenance record stores (a signed 64-bit integer).
MAX_SEED = 2**63 - 1


def check_seed(seed: Any, name: str = "seed") -> int:
    """``seed`` as an int in ``0..2^63 − 1`` (bools refused)."""
    return check_size(name, seed, minimum=0, maximum=MAX_SEED)


#: Most items read from an iterable without a length (an iterator, a generator): a guard against endless ones.
MAX_ITEMS = 1_000_000
_NOT_TEXTS = (str, bytes, bytearray, memoryview, Mapping, Set)


def _check_sentences(name: str, items: Iterable[Any]) -> list[str]:
    if isinstance(items, Sized):
        out = list(items)
    else:
        out = list(itertools.islice(items, MAX_ITEMS + 1))
        if len(out) > MAX_ITEMS:
            raise PMarkValueError(f"{name} yielded more than {MAX_ITEMS:,} items; pass a list")
    for i, s in enumerate(out):
        if not isinstance(s, str):
            raise _fail(f"{name}[{i}]", "a str (one sentence)", s)
    return out


def check_sentences(sentences: Any, name: str = "sentences") -> list[str]:
    """Sentences: a list, tuple, array or iterator of ``str`` (not a ``str`` itself), returned as a list."""
    if isinstance(sentences, _NOT_TEXTS) or not isinstance(sentences, Iterable):
        raise _fail(name, "a list of str (sentences)", sentences)
    return _check_sentences(name, sentences)


def check_text(text: Any, name: str = "text") -> str | list[str]:
    """A text: a ``str``, or its sentences as a list (tuple, array, iterator) of ``str``, returned as a list.

    Raises:
      PMarkValueError: ``bytes`` (decode first), ``None``, a non-iterable, a mapping or set, or an item that is
        not a ``str``.
    """
    if isinstance(text, str):
        return text
    if isinstance(text, (bytes, bytearray, memoryview)):
        raise _fail(
            name, "a str or a list of str (sentences)", text, " (decode it first: data.decode('utf-8'))"
        )
    if isinstance(text, _NOT_TEXTS) or not isinstance(text, Iterable):
        raise _fail(name, "a str or a list of str (sentences)", text)
    return _check_sentences(name, text)


def check_texts(texts: Any, name: str = "texts") -> list[str | list[str]]:
    """Many texts: a list or tuple of texts (each as :func:`check_text`)."""
    if isinstance(texts, str):
        raise PMarkValueError(f"{name} must be a sequence of texts (use detect() for one text), got a str")
    if isinstance(texts, (bytes, bytearray, memoryview)) or not isinstance(texts, Sequence):
        raise _fail(name, "a sequence of texts (each a str or a list of str)", texts)
    return [check_text(t, f"{name}[{i}]") for i, t in enumerate(texts)]


def split_text(text: str, splitter: Callable[[str], Any] | None) -> list[str]:
    """``splitter(text)`` checked to be a list (or other iterable) of ``str`` (default: ``split_sentences``).

    Raises:
      PMarkValueError: the splitter returned something else (``None``; a ``str``, whose characters are not
        sentences; a mapping or set), or an item that is not a ``str``.
    """
    if splitter is None:
        from pmark_impl.sampling._segment import split_sentences

        return split_sentences(text)
    out = splitter(text)
    if isinstance(out, _NOT_TEXTS) or not isinstance(out, Iterable):
        raise _fail("splitter(text)", "a list of str (the sentences)", out)
    return _check_sentences("splitter(text)", out)


def check_candidates(cands: Any, n: int, *, generation: bool = False) -> list[Any]:
    """A sampler's answer: a sequence of ``n`` candidates, each with a ``str`` ``.text`` (generation: also an
    integer ``.n_tokens`` and a ``str`` ``.outcome``, which the step records)."""
    if isinstance(cands, (str, bytes)) or not isinstance(cands, Sequence):
        raise _fail("sampler.sample(...)", "a list of candidates", cands)
    out = list(cands)
    if len(out) != n:
        raise PMarkValueError(f"sampler returned {len(out)} candidates, {n} were requested")
    for i, c in enumerate(out):
        tokens = getattr(c, "n_tokens", None)
        if not isinstance(getattr(c, "text", None), str) or (
            generation
            and (
                not isinstance(getattr(c, "outcome", None), str)
                or isinstance(tokens, bool)
                or not isinstance(tokens, numbers.Integral)
            )
        ):
            what = (
                "a Candidate (str .text, int .n_tokens, str .outcome)"
                if generation
                else "a candidate with a str .text"
            )
            raise _fail(f"sampler.sample(...)[{i}]", what, c)
    return out
