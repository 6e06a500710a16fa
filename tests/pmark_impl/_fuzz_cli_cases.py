"""Hypothesis strategies of ``pmark`` command lines, one per subcommand, for ``test_fuzz_standing.py``.

Each strategy draws a :class:`~_fuzz_harness.CliCase` with :class:`_fuzz_case.Case`: the argv, the files it needs,
the outputs it may write and whether it must be refused; valid except, usually, for one hostile choice. Values come from short lists (valid, boundary, out of range, wrong type) so that JAX compiles few shapes; paths
alias each other on purpose (:func:`_fuzz_inputs.file_output`, :func:`_fuzz_inputs.dir_output`). Valid runs
use tiny sizes (a few sentences, ``N <= 16``, one document for ``evaluate``, one cheap claim for ``check``).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from _fuzz_assets import DIM16, Assets
from _fuzz_case import PLUGINS, VICTIMS, Case, simple_file
from _fuzz_harness import CliCase, FileSpec
from _fuzz_inputs import Drawn, text_variants
from hypothesis import strategies as st

# --------------------------------------------------------------------------------------------------------------
ENCODER_NAMES = ("a\nb", "e" * 1100, "e" * 1024, "", " ", "tab\tname", "编码器", "./no/such/encoder", DIM16)


@st.composite
def keygen_cases(draw: Any, assets: Assets) -> CliCase:
    c = Case(draw, "keygen", 16)
    inputs: tuple[str, ...] = ()
    if draw(st.integers(0, 2)) == 0:
        c.corpus("--centroid-corpus")
        inputs = c.inputs()
        c.opt("--n-clusters", (None, "2", "3"), ("1", "1025", "x"))
        c.opt("--centroid-field", (None,), odd=("text", "body"))
        c.opt("--centroid-seed", (None, "0", "5"), ("-1",))
    else:
        c.opt("--n-clusters", (None,), ("2",))  # needs --centroid-corpus
    out = c.out_file("--out", "new.key", inputs)
    if simple_file(out):
        c.secret.append(out.arg)
        c.followup = ("key_loads", out.arg)  # whatever keygen writes, load_key accepts
    c.opt("--encoder", ("fake-encoder",), odd=ENCODER_NAMES)
    c.opt("--dim", (None, "32", "16", "8"), ("0", "-1", "65537", "many", str(10**30)))
    c.opt("--channels", (None, "1", "4"), ("65", "0", "x"), odd=("64",))
    c.opt("--seeding", (None, "position", "context"), ("bogus",))
    c.opt("--seed-window", (None, "1", "64"), ("65", "0"))
    c.flag("--force")
    return c.build()


PROMPTS_INLINE = ("P.", "Ünïcödé prompt. Ωμέγα.", "first line\nsecond line")
ODD_PROMPTS = ("", "x" * 5000, "--", "-x")


def _prompt(c: Case, assets: Assets, inline_flag: str | None) -> None:
    """Inline prompt (``generate``'s positional PROMPT when ``inline_flag`` is None) or a prompt file; at the
    hostile place: both, neither, an odd text or an unreadable file."""
    hostile = c.hostile()
    how = c.draw(st.sampled_from(("both", "neither", "odd", "bad-file") if hostile else ("inline", "file")))
    if how in ("file", "both", "bad-file"):
        variants = {
            k: v
            for k, v in text_variants(assets, "p.txt").items()
            if k != "stdin" and v[1] == (how == "bad-file")
        }
        tag = c.draw(st.sampled_from(sorted(variants)))
        files, refuse, _ = variants[tag]
        c.add(Drawn("p.txt", files, refuse, f"prompt-file:{tag}"), "--prompt-file")
    if how in ("inline", "both", "odd"):
        text = c.draw(st.sampled_from(ODD_PROMPTS if how == "odd" else PROMPTS_INLINE))
        c.argv += [inline_flag, text] if inline_flag else ["--", text]
        c.tags.append(f"prompt:{how}:{text[:10]!r}")
    if how == "both":
        c.refuse.append("the prompt given twice")
    if how == "neither" and inline_flag is None:
        c.refuse.append("no prompt")


@st.composite
def generate_cases(draw: Any, assets: Assets) -> CliCase:
    c = Case(draw, "generate", 36)
    key_name = draw(st.sampled_from(("k.key", "k.key", "out.txt.pmark.json")))
    c.key(assets, name=key_name)
    mode = c.opt("--mode", (None, "offline", "online", "semstamp", "ksemstamp", "simmark"), ("bogus",))
    n = c.opt("--n", (None, "4", "16"), ("0", "65537", str(10**30)), odd=("1", "12"))
    channels = c.opt("--channels", (None, "1", "4"), ("5", "0", "65"))
    b = int(channels) if channels in ("1", "4") else 4  # every key of the suite has 4 channels
    if mode == "online" and n in ("1", "4", "12") and int(n) % 2**b:
        c.refuse.append("N % 2**b != 0")
    c.opt("--max-sentences", (None, "1", "3"), ("0", "10001", str(10**30)))
    c.opt("--lsh-dim", (None, "1", "3"), ("0", "32", "31"), odd=("16",))
    c.opt("--n-clusters", (None, "2", "8"), ("1", "65537"))
    c.opt("--gamma", (None, "0.25"), ("0", "1", "nan"), odd=("0.999999",))
    c.opt("--margin", (None, "0"), ("1", "-0.1", "nan"), odd=("0.5",))
    c.opt("--offline-batch", (None, "1", "16"), ("0",))
    c.opt("--max-trials", (None, "1", "16"), ("0", "65537"))
    c.opt("--temperature", (None, "0.7", "100"), ("0", "101", "nan", "-1"))
    c.opt("--top-p", (None, "0.95", "1"), ("0", "1.5"))
    c.opt("--seed", (None, "0", str(2**63 - 1)), ("-1", str(2**63)))
    c.opt("--device", (None, "cpu"), ("tpu", "cuda:99999"))
    c.opt("--dtype", (None, "float32"), ("float8", "int8"))
    c.opt("--green-seeding", (None, "position"), ("x",), odd=("cell",))
    c.opt("--simmark-low", (None,), ("-2", "nan"), odd=("0.5",))
    c.opt("--model", (None, "some/model"), odd=("/no/such/model.gguf", ""))
    c.opt("--encoder", (None,), (DIM16,))
    _prompt(c, assets, None)
    out = prov = None
    if draw(st.booleans()):
        out = c.out_file("--out", "out.txt")
        if not out.refuse and out.arg:
            c.outputs.append(out.arg.rstrip("/") + ".pmark.json")
    if draw(st.booleans()):
        if out is not None and c.hostile():
            c.argv += ["--provenance", out.arg]
            c.refuse.append("--provenance = --out")
        else:
            prov = c.out_file("--provenance", "prov.json")
    if key_name == "out.txt.pmark.json" and out is not None and out.arg == "out.txt" and prov is None:
        c.refuse.append("the record TEXT.pmark.json would replace the key")
    c.flag("--force")
    if "--" in c.argv:  # PROMPT last, after ``--`` (prompts that look like options)
        i = c.argv.index("--")
        c.argv = c.argv[:i] + c.argv[i + 2 :] + c.argv[i : i + 2]
    return c.build()


def _record(assets: Assets, mode: str, edit: str) -> tuple[bytes, bool]:
    """A provenance record of ``mode`` with ``edit`` applied; must detection refuse it?"""
    raw = assets.texts[mode][1]
    doc = json.loads(raw)
    edits: dict[str, tuple[Any, bool]] = {
        "valid": (doc, False),
        "online-N-65536": ({**doc, "mode": "online", "n_candidates": 65536}, False),
        "N-zero": ({**doc, "n_candidates": 0}, True),
        "N-huge": ({**doc, "n_candidates": 10**30}, True),
        "channels-99": ({**doc, "channels": 99}, True),
        "mode-bogus": ({**doc, "mode": "bogus"}, True),
        "lsh-dim-31": ({**doc, "settings": {**doc.get("settings", {}), "lsh_dim": 31}}, True),
        "missing-steps": ({k: v for k, v in doc.items() if k != "steps"}, True),
        "format-wrong": ({**doc, "format": "other"}, True),
        "prompt-int": ({**doc, "prompt": 5}, True),
    }
    if edit == "duplicate-mode":
        return raw.rstrip().rstrip(b"}") + b', "mode": "offline"}\n', True
    if edit == "nan":
        return raw.replace(b'"seed": 0', b'"seed": NaN'), True
    value, refuse = edits[edit]
    return json.dumps(value).encode(), refuse


RECORD_EDITS = (
    "online-N-65536",
    "N-zero",
    "N-huge",
    "channels-99",
    "mode-bogus",
    "lsh-dim-31",
    "missing-steps",
    "format-wrong",
    "prompt-int",
    "duplicate-mode",
    "nan",
)


@st.composite
def detect_cases(draw: Any, assets: Assets) -> CliCase:
    c = Case(draw, "detect", 33)
    c.key(assets)
    no_provenance = draw(st.integers(0, 4)) == 0
    if draw(
        st.booleans()
    ):  # a generated text with its provenance record beside it (or given with --provenance)
        mode = draw(st.sampled_from(("offline", "online", "semstamp", "ksemstamp")))
        edit = draw(st.sampled_from(RECORD_EDITS)) if c.hostile() else "valid"
        record, refuse = _record(assets, mode, edit)
        where = draw(st.sampled_from(("beside", "flag")))
        path = "gen.txt.pmark.json" if where == "beside" else "rec.json"
        files = (FileSpec("gen.txt", data=assets.texts[mode][0]), FileSpec(path, data=record))
        c.add(
            Drawn(
                "",
                files,
                refuse and not (where == "beside" and no_provenance),
                f"record:{mode}:{edit}:{where}",
            )
        )
        if where == "flag":
            c.argv += ["--provenance", path]
            if no_provenance:
                c.refuse.append("--provenance with --no-provenance")
        text_arg = "gen.txt"
    else:
        text_arg = c.text(assets)
    c.opt("--mode", (None, None, "offline", "semstamp", "ksemstamp"), odd=("online", "simmark"))
    c.opt("--test", (None, "hard"), ("bogus",), odd=("per_key", "resample", "soft"))
    c.opt("--alpha", (None, "0.01", "0.5"), ("0", "1", "nan"), odd=("1e-300",))
    c.opt("--delta", (None, "0.001"), ("-1", "nan"), odd=("0",))
    c.opt("--K", (None, "150"), ("0", "inf"))
    c.opt("--channels", (None, "1", "4"), ("5", "0"))
    c.opt("--n", (None, "16"), ("0",), odd=("65536",))
    c.opt("--lsh-dim", (None, "3"), ("0",), odd=("16", "31"))
    c.opt("--gamma", (None, "0.25"), ("0", "nan"))
    c.opt("--n-clusters", (None, "2"), ("1",))
    c.opt("--green-seeding", (None, "position"), odd=("cell",))
    c.opt("--seed", (None, "0"), ("-1",))
    c.opt("--encoder", (None,), (DIM16,))
    c.opt("--device", (None, "cpu"), ("tpu",))
    evidence = c.flag("--evidence")
    decision = c.flag("--decision-only")
    if decision and evidence:
        c.refuse.append("--evidence with --decision-only")
    if c.flag("--verbose") and decision:
        c.refuse.append("--verbose with --decision-only")
    if no_provenance:
        c.argv.append("--no-provenance")
    if c.hostile():
        how = draw(st.sampled_from(("valid", "duplicate", "missing", "alias-text")))
        data = {
            "valid": assets.simmark,
            "duplicate": assets.simmark.rstrip().rstrip(b"}") + b', "low": 0.1}\n',
        }
        if how in data:
            c.add(
                Drawn(
                    "sm.json",
                    (FileSpec("sm.json", data=data[how]),),
                    how == "duplicate",
                    f"simmark-cal:{how}",
                )
            )
            c.argv += ["--simmark-calibration", "sm.json"]
        else:
            c.argv += ["--simmark-calibration", "none.json" if how == "missing" else text_arg]
            c.refuse.append(f"simmark calibration {how}")
    if draw(st.integers(0, 3)) == 0:
        _prompt(c, assets, "--prompt")
    if draw(st.integers(0, 2)) == 0:
        _count_queries(c)
    c.argv.append(text_arg)
    return c.build()


#: A query state file that an earlier ``pmark detect --count-queries`` wrote (updated in place, no --force).
QUERY_STATE = (
    b'{"format": "pmark-query-counts", "keys": {"0123456789abcdef": {"counts": {"total": 2}, "warned": 0}}, '
    b'"version": 1}\n'
)


def _count_queries(c: Case) -> None:
    """``--count-queries STATE``: a fresh or earlier state file, or (hostile) an output that aliases an input (the
    key, the text, the record, a prompt or calibration file), a link, a folder, an unwritable place. A file that
    is not a state file (a user's own) is refused whatever ``--force`` says; so is SimMark, which has no key."""
    if c.draw(st.integers(0, 3)) == 0:
        d = Drawn("q.json", (FileSpec("q.json", data=QUERY_STATE),), False, "count:earlier", ("q.json",))
        c.add(dataclasses.replace(d, owned=("q.json",)), "--count-queries")
        return
    c.out_file("--count-queries", "q.json")


# --------------------------------------------------------------------------------------------------------------
ATTACKS = (
    "word-delete",
    "word-substitute",
    "sentence-delete",
    "sentence-insert",
    "sentence-merge",
    "sentence-split",
    "sentence-swap",
    "copy-paste",
)
ODD_ATTACKS = ("paraphrase-sentence", "paraphrase-document")
GOOD_PARAMS = (
    "rate=0.1",
    "rate=0",
    "rate=1",
    "position=0",
    'human="A human text. With two sentences."',
    'sentences=["A human sentence here."]',
)
BAD_PARAMS = (
    "rate=nan",
    "rate=1e400",
    "rate=-0.1",
    "rate=2",
    "rate=true",
    'rate="0.1"',
    "=1",
    "rate",
    "speed=1",
)
ODD_PARAMS = (
    "model=1",
    "model=null",
    "position=-1",
    "position=99",
    "position=1.5",
    "span=[0,1]",
    "human=5",
    "sentences=[]",
    "lexicon=1",
    "n_candidates=0",
    "temperature=nan",
)
#: Attack parameters given twice (--param rate=0.1 --param rate=0.2) or a value list where one value is expected.
REPEATED = (("rate=0.1", "rate=0.2"), ("rate=0.1", "rate=0.1"), ("position=0", "position=1"))


@st.composite
def attack_cases(draw: Any, assets: Assets) -> CliCase:
    c = Case(draw, "attack", 13)
    if c.hostile():
        name = draw(st.sampled_from(PLUGINS))
        victim = draw(st.sampled_from(("victim", "victim.txt")))
        c.add(Drawn("in.txt", (*VICTIMS, FileSpec("in.txt", data=victim.encode())), True, f"plugin:{name}"))
        text_arg = "in.txt"
    else:
        name = draw(st.sampled_from((*ODD_ATTACKS, "bogus") if c.hostile() else ATTACKS))
        if name == "bogus":
            c.refuse.append("unknown attack")
        text_arg = c.text(assets)
    if c.hostile():
        params = list(draw(st.sampled_from(REPEATED)))
        c.refuse.append("a repeated --param")
    elif c.hostile():
        params = [draw(st.sampled_from(BAD_PARAMS + ODD_PARAMS))]
        if params[0] in BAD_PARAMS:
            c.refuse.append(f"--param {params[0]}")
    else:
        params = draw(st.lists(st.sampled_from(GOOD_PARAMS), max_size=1))
    for p in params:
        c.argv += ["--param", p]
    if draw(st.booleans()):
        hostile = c.hostile()
        variants = {
            k: v for k, v in text_variants(assets, "h.txt").items() if k != "stdin" and v[1] == hostile
        }
        tag = draw(st.sampled_from(sorted(variants)))
        files, refuse, _ = variants[tag]
        c.add(Drawn("h.txt", files, refuse, f"human:{tag}"), "--human-file")
    if c.hostile():  # a provenance record that is not one (the text itself, or nothing on stdin's side)
        c.argv += ["--provenance", text_arg if text_arg != "-" else "in.txt"]
        c.refuse.append("--provenance that is not a record")
    else:
        c.flag("--no-provenance")
    c.opt("--seed", (None, "0", "7"), ("-1",))
    if draw(st.booleans()):
        c.out_file("--out", "out.txt")
    c.flag("--force")
    c.argv += [name, text_arg]
    return c.build()


@st.composite
def attacks_cases(draw: Any, assets: Assets) -> CliCase:
    argv = draw(st.sampled_from(((), ("--json",), ("--json", "--json"), ("extra",), ("--bogus",), ("-h",))))
    c = Case(draw, "attacks", 0)
    c.argv += list(argv)
    if argv and argv[0] in ("extra", "--bogus"):
        c.refuse.append("bad argument")
    return c.build()


@st.composite
def schemes_cases(draw: Any, assets: Assets) -> CliCase:
    """``pmark schemes``: listing, JSON, and plug-ins that must be refused (standard library, missing, unmarked)."""
    argv = draw(
        st.sampled_from(
            (
                (),
                ("--json",),
                ("--load", "os:path"),
                ("--load", "no_such_module_xyz:scheme"),
                ("--load", "pmark_impl.schemes.online:online_step"),
                ("--load", "not a spec"),
                ("extra",),
                ("-h",),
            )
        )
    )
    c = Case(draw, "schemes", 0)
    c.argv += list(argv)
    if argv and argv[0] in ("extra", "--load"):
        c.refuse.append("bad argument or unregistered plug-in")
    return c.build()


@st.composite
def demo_cases(draw: Any, assets: Assets) -> CliCase:
    """Argument validation only: the model loaders refuse, so even a valid demo exits 2 without loading anything."""
    c = Case(draw, "demo", 8)
    c.opt("--sentences", (None, "1"), ("0", "1001", "x", str(10**30)))
    c.opt("--n", (None, "16"), ("0", "65537"))
    c.opt("--channels", (None, "4"), ("0", "65"))
    c.opt("--seed", (None, "0"), ("-1", str(2**63)))
    c.opt("--prompt", (None, "P."), odd=("", "x" * 5000))
    c.opt("--model", (None, "some/model"))
    c.opt("--encoder", (None, "some/encoder"))
    c.flag("--json")
    c.refuse.append("no model can load in the fuzz suite")
    return c.build()


@st.composite
def audit_cases(draw: Any, assets: Assets) -> CliCase:
    """``pmark audit``: targets that do not exist or are not registered, and bad sizes — all refused with one line
    before any model is built or anything is written (a valid audit takes seconds: ``tests/audit`` runs those)."""
    target = draw(
        st.sampled_from(
            (
                "os:path",
                "no_such_module_xyz:make_target",
                "pmark_impl.schemes.online:online_step",
                "not a spec",
                "no-such-scheme",
                "",
                "x" * 400,
            )
        )
    )
    c = Case(draw, "audit", 6)
    c.argv += [target, "--out", "audit-out"]
    c.opt("--keys", (None, "2"), ("1", "x"))
    c.opt("--sentences", (None, "2"), ("0",))
    c.opt("--alpha", (None, "0.05"), ("0", "1.5", "nan"))
    c.opt("--timeout", (None, "5"), ("0", "-1"))
    c.opt("--seed", (None, "0"), ("-1",))
    c.flag("--quick")
    c.refuse.append("a target that does not exist or is not registered")
    return c.build()


#: The strategies of this module, by subcommand (the report-writing ones are in :mod:`_fuzz_cli_reports`).
CLI_STRATEGIES = {
    "keygen": keygen_cases,
    "generate": generate_cases,
    "detect": detect_cases,
    "demo": demo_cases,
    "attacks": attacks_cases,
    "attack": attack_cases,
    "schemes": schemes_cases,
    "audit": audit_cases,
}

__all__ = ["CLI_STRATEGIES"]
