"""The builder of one fuzz command line (:class:`Case`): valid except, usually, for ONE hostile choice.

A strategy numbers the places where a case could be hostile (an option's value, a key file, a text, an output
path, ...; an output path counts for several places, so aliasing is drawn often) and draws which one is
(:meth:`Case.hostile`), so that the hostile value is what the command meets rather than an unrelated bad option.
``bad`` values must be refused (exit 2); ``odd`` ones (boundaries) may be refused or accepted, never with a
traceback.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from _fuzz_assets import Assets
from _fuzz_harness import CliCase, FileSpec
from _fuzz_inputs import Drawn, corpus_input, dir_output, file_output, key_input, text_input
from hypothesis import strategies as st

#: Plug-ins named ``module:function`` that are not registered: every command must refuse them.
PLUGINS = (
    "shutil:rmtree",
    "os:remove",
    "_fuzz_plugins:write_sentinel",
    "_fuzz_plugins:write_sentinel_returning_int",
    "_fuzz_plugins:NOT_CALLABLE",
    "no_such_module_pmark_fuzz:f",
    ":f",
    "os:",
)
#: Files a destructive plug-in would destroy (the text handed to it names them).
VICTIMS = (
    FileSpec("victim", "dir"),
    FileSpec("victim/precious.txt", data=b"precious"),
    FileSpec("victim.txt", data=b"precious"),
)


class Case:
    """Accumulates one case: argv, files (first spec of a path wins), outputs, why it must be refused."""

    def __init__(self, draw: Any, group: str, places: int = 20) -> None:
        self.draw = draw
        self.group = group
        self.focus = draw(st.integers(0, places))  # the hostile place; >= the number of places: a valid case
        self.place = -1
        self.argv: list[str] = [group]
        self.files: dict[str, FileSpec] = {}
        self.tags: list[str] = []
        self.outputs: list[str] = []
        self.replaceable: list[str] = []
        self.owned: list[str] = []
        self.secret: list[str] = []
        self.refuse: list[str] = []
        self.stdin: bytes | None = None
        self.on_error: list[str] = []
        self.followup: tuple[str, str] | None = None
        self.budget = 15.0

    def hostile(self, weight: int = 1) -> bool:
        """Is the next place the hostile one? (``weight``: how many places it counts for.)"""
        first = self.place + 1
        self.place += weight
        return first <= self.focus <= self.place

    def add(self, d: Drawn, flag: str | None = None) -> str:
        for spec in d.files:
            self.files.setdefault(spec.path, spec)
        if flag is not None:
            self.argv += [flag, d.arg]
        self.outputs += d.outputs
        self.replaceable += d.replaceable
        self.owned += d.owned
        if d.tag:
            self.tags.append(d.tag)
        if d.refuse:
            self.refuse.append(d.tag)
        return d.arg

    def opt(
        self, flag: str, good: tuple[str | None, ...], bad: tuple[str, ...] = (), odd: tuple[str, ...] = ()
    ) -> str | None:
        """``flag VALUE``: a ``good`` value (``None``: no flag); at the hostile place a ``bad`` one (must be
        refused) or an ``odd`` one (a boundary: refused or accepted, never a traceback)."""
        hostile = bool(bad or odd) and self.hostile()
        pool = (bad + odd) if hostile else good
        value = self.draw(st.sampled_from(pool))
        if value is not None:
            self.argv += [flag, value]
            self.tags.append(f"{flag}={value[:20]!r}" if hostile else "")
            if value in bad:
                self.refuse.append(f"{flag} {value[:20]!r}")
        return value

    def flag(self, flag: str) -> bool:
        on = self.draw(st.booleans())
        if on:
            self.argv.append(flag)
        return on

    def inputs(self) -> tuple[str, ...]:
        """The regular files created so far (what an output may alias)."""
        return tuple(p for p, s in self.files.items() if s.kind == "file")

    def build(self) -> CliCase:
        tags = [t for t in self.tags if t]
        return CliCase(
            group=self.group,
            tag=" ".join(tags + [f"must-refuse({'; '.join(self.refuse)})"] * bool(self.refuse)),
            argv=tuple(self.argv),
            files=tuple(self.files.values()),
            outputs=tuple(self.outputs),
            replaceable=tuple(self.replaceable),
            owned=tuple(self.owned),
            secret_outputs=tuple(self.secret),
            must_refuse=bool(self.refuse),
            stdin=self.stdin,
            may_create_on_error=tuple(self.on_error),
            followup=self.followup,
            budget_s=self.budget,
        )

    # the inputs and outputs, hostile at their place
    def key(
        self, assets: Assets, flag: str | None = "--key", name: str = "k.key", insecure_flag: bool = True
    ) -> str:
        """A key; with ``--allow-insecure-key`` (drawn) a group-readable key is acceptable."""
        d = self.draw(key_input(assets, hostile=self.hostile(2), name=name))
        if insecure_flag and self.draw(st.booleans()):
            self.argv.append("--allow-insecure-key")
            if d.tag == "key:mode-0644":
                d = dataclasses.replace(d, refuse=False)
        return self.add(d, flag)

    def text(self, assets: Assets, name: str = "in.txt") -> str:
        d, self.stdin = self.draw(text_input(assets, name, hostile=self.hostile()))
        return self.add(d)

    def corpus(self, flag: str) -> str:
        return self.add(self.draw(corpus_input(hostile=self.hostile())), flag)

    def out_file(self, flag: str, name: str, inputs: tuple[str, ...] | None = None) -> Drawn:
        """An output file (``inputs``: what it may alias, default every regular file created so far)."""
        inputs = self.inputs() if inputs is None else inputs
        d = self.draw(file_output(inputs, name, hostile=self.hostile(4)))
        self.add(d, flag)
        return d

    def out_dir(self, flag: str, own: dict[str, bytes], name: str) -> Drawn:
        d = self.draw(dir_output(self.inputs(), own, name, hostile=self.hostile(4)))
        self.add(d, flag)
        return d


def simple_file(d: Drawn) -> bool:
    return not d.refuse and d.arg != "" and "symlink" not in d.tag


__all__ = ["PLUGINS", "VICTIMS", "Case", "simple_file"]
