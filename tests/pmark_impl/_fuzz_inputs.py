"""What the fuzz suite hands to ``pmark``: valid and hostile variants of each input, and output paths that alias.

Variants start from the valid files of :mod:`_fuzz_assets`. The strategies :func:`key_input`, :func:`text_input`,
:func:`corpus_input`, :func:`file_output` and :func:`dir_output` draw one input or output path (valid, or with
``hostile=True`` malformed, unreadable, aliasing another input, unwritable) with the files it needs and whether
the command must refuse it.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from _fuzz_assets import CORPUS, CORPUS_JSONL, PROC_PATH, SENTENCES, TEXT, Assets, document
from _fuzz_harness import FileSpec
from hypothesis import strategies as st


# --------------------------------------------------------------------------------------------------------------
# Inputs: a drawn input is (argument value, files to create, must the command refuse it).
# --------------------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Drawn:
    """One drawn input or output path."""

    arg: str
    files: tuple[FileSpec, ...] = ()
    refuse: bool = False
    tag: str = ""
    outputs: tuple[str, ...] = ()
    replaceable: tuple[str, ...] = ()
    owned: tuple[str, ...] = ()


def _json_with(doc: dict, **raw: str) -> bytes:
    """``doc`` as JSON with some members written as raw JSON text (repeated members, odd literals)."""
    parts = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in doc.items()]
    parts += [f"{json.dumps(k.rstrip('_'))}: {v}" for k, v in raw.items()]
    return ("{" + ", ".join(parts) + "}\n").encode()


def key_variants(assets: Assets, name: str = "k.key") -> dict[str, tuple[tuple[FileSpec, ...], bool]]:
    """``tag -> (files, must refuse)``: valid keys of every kind and malformed, aliased or odd key files."""
    good = json.loads(assets.keys["k"])
    cal = json.loads(assets.keys["cal"])
    other_secret = json.dumps("ab" * 32)
    inf_centre = json.dumps(cal).replace(str(cal["calibration"]["centre"][0]), "1e999", 1).encode()

    def f(data: bytes, mode: int = 0o600) -> tuple[FileSpec, ...]:
        return (FileSpec(name, data=data, mode=mode),)

    def doc(**changes: Any) -> bytes:
        return json.dumps({**good, **changes}).encode()

    return {
        "good": (f(assets.keys["k"]), False),
        "calibrated": (f(assets.keys["cal"]), False),
        "context-seeded": (f(assets.keys["ctx"]), False),
        "fitted-centroids": (f(assets.keys["cent"]), False),
        "bom": (f(b"\xef\xbb\xbf" + assets.keys["k"]), False),
        "encoder-1024-chars": (f(doc(encoder="e" * 1024)), False),
        "encoder-unicode": (f(doc(encoder="编码器-ü")), False),
        "symlink-to-good": (
            (
                FileSpec("real.key", data=assets.keys["k"], mode=0o600),
                FileSpec(name, "symlink", target="real.key"),
            ),
            False,
        ),
        "mode-0644": (f(assets.keys["k"], 0o644), True),
        "duplicate-secret": (
            f(
                _json_with(
                    {k: v for k, v in good.items() if k != "secret"},
                    secret=json.dumps(good["secret"]),
                    secret_=other_secret,
                )
            ),
            True,
        ),
        "duplicate-dim": (f(_json_with(good, dim_="16")), True),
        "duplicate-format": (f(_json_with(good, format_='"pmark-key"')), True),
        "encoder-newline": (f(doc(encoder="a\nb")), True),
        "encoder-1100-chars": (f(doc(encoder="e" * 1100)), True),
        "encoder-empty": (f(doc(encoder="")), True),
        "encoder-list": (f(doc(encoder=["fake-encoder"])), True),
        "dim-string": (f(doc(dim="32")), True),
        "dim-float": (f(doc(dim=32.0)), True),
        "dim-bool": (f(doc(dim=True)), True),
        "dim-huge": (f(doc(dim=10**30)), True),
        "dim-16": (f(doc(dim=16, channels=4)), True),
        "channels-zero": (f(doc(channels=0)), True),
        "secret-int": (f(doc(secret=12)), True),
        "secret-short": (f(doc(secret="ab")), True),
        "version-true": (f(doc(version=True)), True),
        "version-3": (f(doc(version=3)), True),
        "extra-field": (f(doc(comment="hi")), True),
        "nan-literal": (f(_json_with({k: v for k, v in good.items() if k != "dim"}, dim="NaN")), True),
        "calibration-infinite-centre": (f(inf_centre), True),
        "top-level-list": (f(b"[1, 2]"), True),
        "deep-nesting": (f(b"[" * 50_000), True),
        "empty": (f(b""), True),
        "not-utf8": (f(b'{"format": "\xff"}'), True),
        "directory": ((FileSpec(name, "dir", mode=0o700),), True),
        "fifo": ((FileSpec(name, "fifo"),), True),
        "dangling-symlink": ((FileSpec(name, "symlink", target="nowhere.key"),), True),
        "symlink-loop": ((FileSpec(name, "symlink", target=name),), True),
        "dev-zero": ((FileSpec(name, "symlink", target="/dev/zero"),), True),
        "missing": ((), True),
    }


@st.composite
def key_input(draw: Any, assets: Assets, *, hostile: bool = False, name: str = "k.key") -> Drawn:
    """A ``--key`` argument: a valid key, or (``hostile``) a malformed or odd key file."""
    variants = key_variants(assets, name)
    tags = sorted(t for t, (_, refuse) in variants.items() if refuse == hostile)
    tag = draw(st.sampled_from(tags))
    files, refuse = variants[tag]
    return Drawn(name, files, refuse, f"key:{tag}")


def text_variants(
    assets: Assets, name: str = "in.txt"
) -> dict[str, tuple[tuple[FileSpec, ...], bool, bytes | None]]:
    """``tag -> (files, must refuse, stdin)`` for a text file argument (``-`` reads ``stdin``)."""

    def f(data: bytes) -> tuple[FileSpec, ...]:
        return (FileSpec(name, data=data),)

    out: dict[str, tuple[tuple[FileSpec, ...], bool, bytes | None]] = {
        f"sentences-{k}": (f((" ".join(SENTENCES[10 : 10 + k]) + "\n").encode()), False, None)
        for k in (0, 1, 3, 6)
    }
    out.update(
        {
            "generated-offline": (f(assets.texts["offline"][0]), False, None),
            "blank": (f(b" \n\n\t\n"), False, None),
            "bom": (f(b"\xef\xbb\xbf" + TEXT), False, None),
            "unicode": (
                f("Ünïcödé sentence here. Ωμέγα is a letter. 東京は大きい。\n".encode()),
                False,
                None,
            ),
            "one-long-sentence": (f((" ".join(["word"] * 3000) + "\n").encode()), False, None),
            "stdin": ((), False, TEXT),
            "latin1": (f("Café noir est bon.".encode("latin-1")), True, None),
            "nul-byte": (f(b"One sentence.\x00Two."), True, None),
            "directory": ((FileSpec(name, "dir"),), True, None),
            "fifo": ((FileSpec(name, "fifo"),), True, None),
            "dev-zero": ((FileSpec(name, "symlink", target="/dev/zero"),), True, None),
            "missing": ((), True, None),
        }
    )
    return out


@st.composite
def text_input(
    draw: Any, assets: Assets, name: str = "in.txt", hostile: bool = False
) -> tuple[Drawn, bytes | None]:
    """A text FILE argument (and the bytes on stdin when it is ``-``): valid, or (``hostile``) unreadable."""
    variants = text_variants(assets, name)
    tag = draw(st.sampled_from(sorted(t for t, v in variants.items() if v[1] == hostile)))
    files, refuse, stdin = variants[tag]
    return Drawn("-" if tag == "stdin" else name, files, refuse, f"text:{tag}"), stdin


def corpus_variants() -> dict[str, tuple[str, tuple[FileSpec, ...], bool]]:
    """``tag -> (argument, files, must refuse)`` for ``--corpus`` / ``--centroid-corpus`` / ``--prompts``."""
    dup = b'{"text": "A first sentence is here.", "text": "' + document(1, 12).encode() + b'"}\n'
    return {
        "plain": ("corpus.txt", (FileSpec("corpus.txt", data=CORPUS),), False),
        "jsonl": ("corpus.jsonl", (FileSpec("corpus.jsonl", data=CORPUS_JSONL),), False),
        "jsonl-duplicate-member": (
            "corpus.jsonl",
            (FileSpec("corpus.jsonl", data=CORPUS_JSONL + dup),),
            True,
        ),
        "jsonl-nan": (
            "corpus.jsonl",
            (FileSpec("corpus.jsonl", data=CORPUS_JSONL + b'{"text": NaN}\n'),),
            True,
        ),
        "jsonl-broken": ("corpus.jsonl", (FileSpec("corpus.jsonl", data=b'{"text": \n'),), True),
        "empty": ("corpus.txt", (FileSpec("corpus.txt", data=b""),), True),
        "too-short": ("corpus.txt", (FileSpec("corpus.txt", data=b"One. Two.\n"),), True),
        "latin1": ("corpus.txt", (FileSpec("corpus.txt", data="Café.".encode("latin-1")),), True),
        "directory": ("corpus.txt", (FileSpec("corpus.txt", "dir"),), True),
        "fifo": ("corpus.txt", (FileSpec("corpus.txt", "fifo"),), True),
        "missing": ("corpus.txt", (), True),
    }


@st.composite
def corpus_input(draw: Any, hostile: bool = False) -> Drawn:
    tag = draw(st.sampled_from(sorted(t for t, v in corpus_variants().items() if v[2] == hostile)))
    arg, files, refuse = corpus_variants()[tag]
    return Drawn(arg, files, refuse, f"corpus:{tag}")


# --------------------------------------------------------------------------------------------------------------
# Output paths, aliasing on purpose.
# --------------------------------------------------------------------------------------------------------------
FILE_OUTPUT_KINDS = (
    "fresh",
    "fresh",
    "fresh-in-missing-folder",
    "existing-user-file",
    "existing-user-file",
    "dangling-symlink",
    "read-only-folder",
    "newline-in-name",
)
HOSTILE_FILE_OUTPUTS = (
    "existing-folder",
    "trailing-slash",
    "alias-input",
    "alias-input",
    "alias-input-dotted",
    "alias-input-absolute",
    "hardlink-to-input",
    "hardlink-to-input",
    "symlink-to-input",
    "proc",
    "fifo",
    "dot",
    "empty-string",
    "name-too-long",
)


@st.composite
def file_output(draw: Any, inputs: tuple[str, ...], name: str = "out.txt", hostile: bool = False) -> Drawn:
    """An output FILE argument; ``hostile``: one that aliases ``inputs`` (relative paths of regular files the case
    creates), is unwritable or is not a file name.

    ``refuse``: the command must exit 2 whatever ``--force`` says.
    """
    kinds = HOSTILE_FILE_OUTPUTS if hostile else FILE_OUTPUT_KINDS
    kinds = kinds if inputs else tuple(k for k in kinds if "input" not in k)
    kind = draw(st.sampled_from(kinds))
    victim = draw(st.sampled_from(inputs)) if inputs else ""
    user = FileSpec(name, data=b"the user's own file\n")
    table: dict[str, Drawn] = {
        "fresh": Drawn(name, outputs=(name,)),
        "fresh-in-missing-folder": Drawn(f"newdir/{name}", outputs=("newdir",)),
        "existing-user-file": Drawn(name, (user,), outputs=(name,), replaceable=(name,)),
        "existing-folder": Drawn(
            name, (FileSpec(name, "dir"), FileSpec(f"{name}/mine.txt", data=b"mine")), True
        ),
        "trailing-slash": Drawn(name + "/", (), True),
        "alias-input": Drawn(victim, (), True),
        "alias-input-dotted": Drawn(f"./sub/../{victim}", (FileSpec("sub", "dir"),), True),
        "alias-input-absolute": Drawn(f"@CASE@/{victim}", (), True),
        "hardlink-to-input": Drawn(name, (FileSpec(name, "hardlink", target=victim),), True),
        "symlink-to-input": Drawn(name, (FileSpec(name, "symlink", target=victim),), True),
        "dangling-symlink": Drawn(
            name, (FileSpec(name, "symlink", target="elsewhere.txt"),), False, outputs=(name, "elsewhere.txt")
        ),
        "proc": Drawn(PROC_PATH, (), True),
        "read-only-folder": Drawn(
            f"ro/{name}", (FileSpec("ro", "dir", mode=0o555),), False, outputs=(f"ro/{name}",)
        ),
        "fifo": Drawn(name, (FileSpec(name, "fifo"),), True),
        "dot": Drawn(".", (), True),
        "empty-string": Drawn("", (), True),
        "name-too-long": Drawn("x" * 300, (), True),
        "newline-in-name": Drawn("two\nlines.txt", (), False, outputs=("two\nlines.txt",)),
    }
    d = table[kind]
    return dataclasses.replace(d, tag=f"out:{kind}" + (f"->{victim}" if "input" in kind else ""))


DIR_OUTPUT_KINDS = ("fresh", "fresh", "existing-empty", "own-previous", "trailing-slash", "nested-fresh")
HOSTILE_DIR_OUTPUTS = (
    "user-folder",
    "user-folder-with-config",
    "user-folder-with-config",
    "alias-input-file",
    "alias-input-parent",
    "symlink-to-user-folder",
    "proc",
    "dot",
    "existing-file",
)


@st.composite
def dir_output(
    draw: Any, inputs: tuple[str, ...], own: dict[str, bytes], name: str = "outdir", hostile: bool = False
) -> Drawn:
    """An output FOLDER argument (``evaluate`` / ``check`` / ``validate-proxy`` / ``calibrate --report``).

    ``own``: the files of a folder this command wrote earlier (replaceable with ``--force``). A user's folder
    (files the toolkit did not write: ``notes.txt``, ``figures/chart.png``, ``report.md``, ``deep/x.tmp``) is
    protected: its files must stay byte-identical, with or without ``--force``.
    """
    kinds = HOSTILE_DIR_OUTPUTS if hostile else DIR_OUTPUT_KINDS
    kind = draw(st.sampled_from([k for k in kinds if inputs or "input" not in k]))
    victim = draw(st.sampled_from(inputs)) if inputs else ""
    user = (
        FileSpec(name, "dir"),
        FileSpec(f"{name}/notes.txt", data=b"my notes\n"),
        FileSpec(f"{name}/report.md", data=b"# my report\n"),
        FileSpec(f"{name}/results.json", data=b'{"mine": true}\n'),
        FileSpec(f"{name}/figures/chart.png", data=b"\x89PNG my chart"),
        FileSpec(f"{name}/deep/er/x.tmp", data=b"my temporary notes"),
    )
    with_config = (*user, FileSpec(f"{name}/config.json", data=b'{"my": "config"}\n'))
    previous = tuple(FileSpec(f"{name}/{rel}", data=data) for rel, data in own.items())
    table: dict[str, Drawn] = {
        "fresh": Drawn(name, outputs=(name,)),
        "nested-fresh": Drawn(f"a/b/{name}", outputs=("a",)),
        "existing-empty": Drawn(name, (FileSpec(name, "dir"),), outputs=(name,)),
        "user-folder": Drawn(name, user, outputs=(name,)),
        "user-folder-with-config": Drawn(name, with_config, outputs=(name,)),
        "own-previous": Drawn(name, previous, outputs=(name,), replaceable=(name,), owned=(name,)),
        "trailing-slash": Drawn(name + "/", outputs=(name,)),
        "alias-input-file": Drawn(victim, (), True),
        "alias-input-parent": Drawn(".", (), False, outputs=(".",)),
        "symlink-to-user-folder": Drawn(
            name,
            (
                *[dataclasses.replace(f, path="real" + f.path[len(name) :]) for f in user],
                FileSpec(name, "symlink", target="real"),
            ),
            False,
            outputs=(name, "real"),
        ),
        "proc": Drawn(PROC_PATH, (), True),
        "dot": Drawn(".", (), False, outputs=(".",)),
        "existing-file": Drawn(name, (FileSpec(name, data=b"a file, not a folder\n"),), True),
    }
    d = table[kind]
    return dataclasses.replace(d, tag=f"outdir:{kind}" + (f"->{victim}" if "input" in kind else ""))
