"""The docs name the audit env's members as the code does.

Every ``env.<name>`` (or ``env.<name>.<attr>…``) that README.md or a page of docs/ mentions must resolve, attribute
by attribute, on the env a target receives; and docs/audit.md names every public member of
:class:`pmark_impl.audit.AuditEnv` (its fields, properties and methods; the tuple's own ``count``/``index`` left
out). A renamed member (``env.lm_sentences`` documented while the code says ``env.lm_text``) fails here.

Two resolutions: on :func:`_spec` — ``AuditEnv`` itself, its ``sampler`` and ``encoder`` read through the
protocols that every env's sampler and encoder satisfy (``SentenceSampler``, ``SentenceEncoder``), so the docs
promise nothing only the tiny LM has; no model is built (about a second) — and, marked slow (it imports PyTorch and
transformers and builds the tiny LM: ~4 s on 2 shared cores), on the real object :func:`pmark_impl.audit.tiny_env`
returns.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
AUDIT_DOC = ROOT / "docs" / "audit.md"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: ``env.a.b`` — not ``.venv`` nor ``os.env``; a sentence's full stop after it is not an attribute.
_MENTION = re.compile(r"(?<![\w.])env((?:\.[A-Za-z_]\w*)+)")


def mentions(text: str) -> list[str]:
    """The dotted paths after ``env.`` in ``text``, in order, without repeats: ``["sampler.sample", …]``."""
    return list(dict.fromkeys(m[1][1:] for m in _MENTION.finditer(text)))


def unresolved(paths: list[str], env: object) -> list[str]:
    """The paths that do not resolve on ``env`` (an object or :func:`_spec`), each cut at its first missing
    attribute (``"sampler.draw"``)."""
    bad = []
    for path in paths:
        obj = env
        for i, part in enumerate(parts := path.split(".")):
            if not _has(obj, part):
                bad.append(".".join(parts[: i + 1]))
                break
            obj = _get(obj, part)
    return bad


class _Members:
    """Resolves attribute names on a class or protocol: its attributes and its annotated (data) members."""

    def __init__(self, cls: type, fields: dict[str, type] | None = None):
        self.cls, self.fields = cls, fields or {}

    def has(self, name: str) -> bool:
        annotated = {n for c in self.cls.__mro__ for n in getattr(c, "__annotations__", {})}
        return not name.startswith("_") and (hasattr(self.cls, name) or name in annotated)

    def get(self, name: str) -> object:
        return _Members(self.fields[name]) if name in self.fields else None


def _spec() -> _Members:
    from pmark_impl.audit import AuditEnv
    from pmark_impl.sampling._protocols import SentenceEncoder, SentenceSampler

    return _Members(AuditEnv, {"sampler": SentenceSampler, "encoder": SentenceEncoder})


def _has(obj: object, name: str) -> bool:
    return obj.has(name) if isinstance(obj, _Members) else hasattr(obj, name)


def _get(obj: object, name: str) -> object:
    return obj.get(name) if isinstance(obj, _Members) else getattr(obj, name)


def members() -> list[str]:
    """The public members of ``AuditEnv`` a target can use."""
    from pmark_impl.audit import AuditEnv

    return sorted(n for n in dir(AuditEnv) if not n.startswith("_") and n not in dir(tuple))


def _found() -> dict[str, list[str]]:
    return {doc.relative_to(ROOT).as_posix(): mentions(doc.read_text(encoding="utf-8")) for doc in DOCS}


def _check_docs(env: object, what: str) -> None:
    found = _found()
    assert found["docs/audit.md"], "docs/audit.md names no env member"
    bad = {doc: unresolved(paths, env) for doc, paths in found.items() if unresolved(paths, env)}
    assert not bad, f"the docs name env members that {what} does not have: {bad}; members: {members()}"


def test_every_documented_member_exists():
    _check_docs(_spec(), "AuditEnv (with its sampler and encoder protocols)")


@pytest.mark.slow
def test_every_documented_member_exists_on_tiny_env():
    from pmark_impl.audit import tiny_env

    _check_docs(tiny_env(), "tiny_env()")


def test_every_member_is_documented():
    named = {p.split(".")[0] for p in mentions(AUDIT_DOC.read_text(encoding="utf-8"))}
    assert {"lm_text", "lm_sentences", "sampler", "law"} <= set(members())
    missing = [m for m in members() if m not in named]
    assert not missing, f"docs/audit.md does not name these AuditEnv members as `env.<name>`: {missing}"


def test_negative_control_a_made_up_member_is_caught():
    spec = _spec()
    text = "(`env.lm_sentence(prompt, seed, T)`, `env.sampler.draw(n)`, `env.law`.) .venv/bin/pmark, os.env.x"
    assert mentions(text) == ["lm_sentence", "sampler.draw", "law"]
    assert unresolved(mentions(text), spec) == ["lm_sentence", "sampler.draw"]
    # a member only one implementation has, beyond the protocol, is not promised
    assert unresolved(["encoder.dim", "encoder.encode", "encoder.vocab", "law.cache_info"], spec) == [
        "encoder.vocab",
        "law.cache_info",
    ]
    # the real doc with one member renamed is caught the same way
    doc = AUDIT_DOC.read_text(encoding="utf-8").replace("env.lm_text(", "env.lm_texts(")
    assert unresolved(mentions(doc), spec) == ["lm_texts"]
