"""Hypothesis strategies of ``load_key`` / ``save_key`` / ``get_attack`` calls (keys and plug-ins, issue 24).

``load_key`` gets every key-file variant of :func:`_fuzz_inputs.key_variants` and paths of wrong types;
``save_key`` gets odd encoder names, shapes and destinations, and what it writes must load back equal (whatever
is written is accepted, and the reverse); ``get_attack`` gets registered names, unregistered ``module:function``
plug-ins (never to be called) and bad parameters, and the attack is then called on good and bad texts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from _fuzz_api_impl import TEXT
from _fuzz_assets import Assets
from _fuzz_harness import ApiCase, FileSpec, short_repr
from _fuzz_inputs import key_variants
from hypothesis import strategies as st


@st.composite
def load_key_cases(draw: Any, assets: Assets) -> ApiCase:
    from pmark_impl.keys import load_key

    variants = key_variants(assets, "k.key")
    tag = draw(st.sampled_from(sorted(variants)))
    files, refuse = variants[tag]
    path_form = draw(st.sampled_from(("str", "str", "Path", "bytes", "None", "int", "list")))
    paths = {
        "str": "k.key",
        "Path": Path("k.key"),
        "bytes": b"k.key",
        "None": None,
        "int": 5,
        "list": ["k.key"],
    }
    dim = 16 if tag == "dim-16" else 32
    if tag == "dim-16":
        refuse = False  # a valid key file of a 16-dimensional encoder
    expected_dim = draw(st.sampled_from((None, 32, 16, True, "32", -1)))
    bad_dim = expected_dim is not None and (type(expected_dim) is not int or expected_dim != dim)
    insecure = draw(st.sampled_from((False, False, True)))
    if tag == "mode-0644" and insecure:
        refuse = False
    if tag in ("calibration-infinite-centre",):
        refuse = True
    path = paths[path_form]
    must = refuse or bad_dim or path_form in ("bytes", "None", "int", "list")
    if path_form == "bytes" and not refuse and not bad_dim:
        must = False  # os.fspath accepts bytes: a bytes path may work (or be refused with a clear error)

    def judge(v: Any, _f: Path) -> list[str]:
        from pmark_impl.keys import WatermarkKey

        if not isinstance(v, WatermarkKey) or v.dim != dim:
            return [f"load_key returned {short_repr(v)}"]
        return []

    return ApiCase(
        "api:load_key",
        f"load_key({path!r}, expected_dim={expected_dim!r}, allow_insecure={insecure}) # k.key: {tag}",
        lambda _f: load_key(path, expected_dim, allow_insecure=insecure),
        judge,
        files=files,
        must_raise=must,
    )


@st.composite
def save_key_cases(draw: Any, assets: Assets) -> ApiCase:
    from pmark_impl.keys import WatermarkKey, load_key, save_key

    secret = bytes(range(32))
    names = ("fake-encoder", "a\nb", "e" * 1100, "e" * 1024, "tab\tname", " ", "编码器", "\x00", "x\u2028y")
    encoder = draw(st.sampled_from(names))
    dim, channels = draw(st.sampled_from(((32, 4), (1, 1), (65536, 64), (65537, 4), (8, 8))))
    form = draw(st.sampled_from(("key", "key", "key", "None", "dict")))
    path_kind = draw(
        st.sampled_from(
            (
                "fresh",
                "fresh",
                "existing",
                "dir",
                "trailing-slash",
                "fifo",
                "symlink",
                "proc",
                "bytes",
                "None",
                "missing-folder",
            )
        )
    )
    force = draw(st.sampled_from((False, True, 1, "no")))
    files: list[FileSpec] = []
    paths: dict[str, Any] = {
        "fresh": "new.key",
        "existing": "old.key",
        "dir": "d",
        "trailing-slash": "new.key/",
        "fifo": "f",
        "symlink": "ln",
        "proc": "/proc/pmark-fuzz/x.key",
        "bytes": b"new.key",
        "None": None,
        "missing-folder": "nodir/new.key",
    }
    files = {
        "existing": [FileSpec("old.key", data=b"old", mode=0o600)],
        "dir": [FileSpec("d", "dir")],
        "fifo": [FileSpec("f", "fifo")],
        "symlink": [FileSpec("ln", "symlink", target="target.key")],
    }.get(path_kind, [])
    path = paths[path_kind]
    must = form != "key" or path_kind in (
        "dir",
        "trailing-slash",
        "fifo",
        "symlink",
        "proc",
        "None",
        "missing-folder",
    )
    also: tuple[type[BaseException], ...] = (
        (FileExistsError,) if path_kind == "existing" and not force else ()
    )

    def call(_f: Path) -> Any:
        key: Any = {"secret": secret.hex()} if form == "dict" else None
        if form == "key":
            key = WatermarkKey(secret, encoder, dim, channels)
        return key, save_key(key, path, force=force)

    def judge(v: Any, folder: Path) -> list[str]:
        key, written = v
        p = folder / Path(written)
        if (p.stat().st_mode & 0o077) != 0:
            return [f"save_key wrote {written} with mode {p.stat().st_mode & 0o777:04o}"]
        try:
            back = load_key(p)
        except ValueError as exc:
            return [f"save_key wrote a key that load_key refuses: {exc}"]
        return [] if back == key else ["load_key(save_key(key)) != key"]

    desc = (
        f"save_key(WatermarkKey(bytes(range(32)), {short_repr(encoder)}, {dim}, {channels}) if {form!r} == 'key' else "
        f"{form}, {path!r}, force={force!r})  # path kind {path_kind}"
    )
    return ApiCase(
        "api:save_key",
        desc,
        call,
        judge,
        files=tuple(files),
        must_raise=must,
        also_allowed=also,
        replaceable=("old.key",) if force else (),
    )


ATTACK_NAMES = (
    "word-delete",
    "word-substitute",
    "sentence-delete",
    "sentence-swap",
    "sentence-split",
    "sentence-merge",
    "sentence-insert",
    "copy-paste",
    "paraphrase-sentence",
    "bogus",
    "",
    None,
    5,
    "shutil:rmtree",
    "os:remove",
    "_fuzz_plugins:write_sentinel",
    "_fuzz_plugins:NOT_CALLABLE",
    "no_such_mod:f",
)
ATTACK_PARAMS: tuple[dict[str, Any], ...] = (
    {},
    {"rate": 0.1},
    {"rate": float("nan")},
    {"rate": 2},
    {"rate": True},
    {"rate": "0.1"},
    {"rate": None},
    {"model": 1},
    {"position": -1},
    {"position": 1.5},
    {"position": 0},
    {"human": 5},
    {"sentences": []},
    {"sentences": ["A human sentence here."]},
    {"human": "A human text. With two sentences."},
    {"speed": 1},
    {"lexicon": 1},
)


@st.composite
def get_attack_cases(draw: Any) -> ApiCase:
    from pmark_impl.attacks import get_attack

    name = draw(st.sampled_from(ATTACK_NAMES))
    params = draw(st.sampled_from(ATTACK_PARAMS))
    text, bad_text = draw(
        st.sampled_from(
            ((TEXT, False), ("victim", False), ("", True), (5, True), (b"x. y.", True), (None, True))
        )
    )
    rng_name, rng, bad_rng = draw(
        st.sampled_from(
            (
                ("default_rng(0)", np.random.default_rng(0), False),
                ("None", None, True),
                ("5", 5, True),
                ("RandomState(0)", np.random.RandomState(0), True),
            )
        )
    )
    plugin = isinstance(name, str) and ":" in name
    must = plugin or name in ("bogus", "", None, 5) or bad_text or bad_rng
    also: tuple[type[BaseException], ...] = (OSError,) if name == "paraphrase-sentence" else ()

    def call(_f: Path) -> Any:
        attack = get_attack(name, **params)
        return attack(text, rng)

    def judge(v: Any, _f: Path) -> list[str]:
        return [] if isinstance(v, str) else [f"the attack returned {short_repr(v)}, not a str"]

    files = (FileSpec("victim", "dir"), FileSpec("victim/precious.txt", data=b"precious"))
    return ApiCase(
        "api:get_attack",
        f"get_attack({name!r}, **{params!r})({short_repr(text)}, {rng_name})",
        call,
        judge,
        files=files,
        must_raise=must,
        also_allowed=also,
    )
