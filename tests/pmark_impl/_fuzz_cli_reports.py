"""Hypothesis strategies of the ``pmark`` commands that write keys, calibrations and report folders: ``calibrate``,
``calibrate-simmark``, ``evaluate``, ``check`` and ``validate-proxy`` (see :mod:`_fuzz_cli_cases` for the scheme).

Report folders are drawn by :func:`_fuzz_inputs.dir_output`: fresh, the command's own earlier folder (replaceable
with ``--force``), or a user's folder (``notes.txt``, ``report.md``, ``results.json``, ``config.json``,
``figures/chart.png``, ``deep/er/x.tmp``) whose files must survive whatever ``--force`` says. Runs are tiny: one
document and two sentences for ``evaluate``, the claim C4 at budget 0.01 for ``check``, 50 sentences of dimension 8
for ``validate-proxy``.
"""

from __future__ import annotations

from typing import Any

from _fuzz_assets import DIM16, PROMPTS, Assets
from _fuzz_case import PLUGINS, VICTIMS, Case, simple_file
from _fuzz_harness import CliCase, FileSpec
from _fuzz_inputs import Drawn
from hypothesis import strategies as st


@st.composite
def calibrate_cases(draw: Any, assets: Assets) -> CliCase:
    c = Case(draw, "calibrate", 22)
    c.budget = 20.0
    key = c.key(assets, flag=None)
    corpus = draw(st.sampled_from(("file",) * 7 + ("builtin",)))
    if corpus == "file":
        c.corpus("--corpus")
    else:
        c.argv += ["--corpus", "builtin"]
    c.opt("--field", (None,), odd=("text", "body"))
    c.opt("--centring", (None, "context", "global"), ("none",))
    c.opt("--text-sentences", (None, "2", "8"), ("1", "1001"))
    c.opt("--held-out", (None, "0.5"), ("0", "1", "nan"), odd=("0.01", "0.99"))
    c.opt("--encoder", (None,), (DIM16,))
    c.opt("--null-lengths", (None, "2-4", "3,5"), ("0-3", "2-99", "x"), odd=("8",))  # K3's text-level null
    c.opt("--shift-corpus", (None, "none"), ("no-such-corpus.txt",))
    out = c.out_file("--out", "new.key")
    if simple_file(out):
        c.secret.append(out.arg)
        c.followup = ("key_loads", out.arg)
    if draw(st.booleans()):
        report = c.out_dir("--report", {}, "report")
        if "." not in report.outputs:  # the held-out report is written even when the key is refused
            c.on_error += list(report.outputs)
    c.flag("--force")
    c.argv.append("--accept-high-fpr")  # the fake encoder's FPR is meaningless; calibration must still run
    c.argv.append(key)
    return c.build()


@st.composite
def calibrate_simmark_cases(draw: Any, assets: Assets) -> CliCase:
    c = Case(draw, "calibrate-simmark", 12)
    c.budget = 20.0
    if draw(st.integers(0, 4)) > 0:
        c.corpus("--corpus")
    c.opt("--field", (None,), odd=("text", "body"))
    c.opt("--low", (None, "0.68", "0.2"), ("-2", "nan"), odd=("0.9", "-1"))
    c.opt("--high", (None, "0.76", "0.8"), ("2", "inf"), odd=("1", "0.5"))
    c.opt("--delta", (None, "0.001", "0.5"), ("nan", "-1"), odd=("0", "1"))
    c.opt("--encoder", (None,), odd=(DIM16,))
    c.out_file("--out", "sm.json")
    c.flag("--force")
    return c.build()


EVAL_ATTACKS = ("none", "word-delete:rate=0.1", "sentence-delete", "word-delete:rate=0.1,0.3")
BAD_EVAL_ATTACKS = (
    "word-delete:rate=0.1;rate=0.2",
    "word-delete:rate=0.1,0.1",
    "word-delete:speed=1",
    "word-delete:rate=2",
    "bogus",
    "",
    "shutil:rmtree",
    "_fuzz_plugins:write_sentinel",
    "os:remove",
)


@st.composite
def evaluate_cases(draw: Any, assets: Assets) -> CliCase:
    c = Case(draw, "evaluate", 22)
    c.budget = 20.0
    c.argv += ["--quiet", "--oracle", "none"]
    if c.hostile():
        c.corpus("--prompts")
        c.refuse = [r for r in c.refuse if not r.startswith("corpus:too-short")]  # one document may be enough
    else:
        c.add(Drawn("prompts.txt", (FileSpec("prompts.txt", data=PROMPTS),), False, ""), "--prompts")
    c.opt("--limit", ("1",), ("0",), odd=("2",))
    c.opt("--min-sentences", ("2",), ("0",), odd=("1", "1000"))
    c.opt("--max-sentences", ("2",), ("0", "100001"), odd=("1", "1001"))
    c.opt(
        "--schemes",
        ("offline", "none"),
        ("bogus", "", "offline,offline"),
        odd=("online", "semstamp", "ksemstamp"),
    )
    c.opt("--n", ("4",), ("0", "4097"), odd=("16",))
    c.opt("--channels", (None, "2"), ("0", "65"))
    if c.hostile():
        spec = draw(st.sampled_from(BAD_EVAL_ATTACKS))
        c.argv += ["--attack", spec]
        c.refuse.append(f"--attack {spec!r}")
    else:
        c.argv += ["--attack", draw(st.sampled_from(EVAL_ATTACKS))]
    c.opt("--grid", (None,), ("N=4", "N=0 b=1", "b=1"), odd=("N=4 b=1", "N=8,12 b=3", "N=4,4 b=1"))
    c.opt("--batch-texts", (None, "1", "3"), ("0", "4097", "x"))
    c.opt("--dtype", (None, "float32"), ("float8", "int8"))
    c.opt("--lsh-dim", (None, "3"), ("17", "31"), odd=("16",))
    c.opt("--device", (None, "cpu"), ("tpu",))
    c.opt("--seed", (None, "0", "3"), ("-1",))
    if draw(st.integers(0, 2)) == 0:
        c.key(assets, insecure_flag=False)  # evaluate has no --allow-insecure-key
    c.out_dir("--out", assets.evaluation, "ev")
    c.flag("--force")
    return c.build()


@st.composite
def check_cases(draw: Any, assets: Assets) -> CliCase:
    c = Case(draw, "check", 9)
    c.budget = 20.0
    if draw(st.integers(0, 5)) == 0:
        c.argv.append("--list")
        c.opt("--only", (None, "C4"), ("NOPE",))
        return c.build()
    c.argv += ["--quick", "--no-progress"]
    c.opt("--only", ("C4",), ("NOPE", "C4 NOPE"))
    c.opt("--budget", ("0.01",), ("0", "nan", "1e7", "-1"))
    c.opt("--seed", (None, "0"), ("-1", str(2**32)))
    c.out_dir("--out", assets.report, "rep")
    c.flag("--force")
    return c.build()


SYNTHETIC = (("50", "8"), ("50", "8", "1.0", "0.5"), ("K=50", "d=8"))  # one shape: JAX compiles once
BAD_SYNTHETIC = (
    ("K=0",),
    ("rho=1",),
    ("bogus=1",),
    ("x",),
    ("50", "8", "1", "0", "0", "9"),
    ("d=0",),
    ("K=" + str(10**15),),
)
PROXIES = ("builtin:pmark", "builtin:pmark", "builtin:semstamp")  # each other proxy costs a JAX compile


@st.composite
def validate_proxy_cases(draw: Any, assets: Assets) -> CliCase:
    c = Case(draw, "validate-proxy", 23)
    c.budget = 20.0
    if c.hostile():
        proxy = draw(st.sampled_from((*PLUGINS, "builtin:bogus")))
        c.add(Drawn("", VICTIMS, True, f"proxy:{proxy}"))
    else:
        proxy = draw(st.sampled_from(PROXIES))
    corpus = draw(st.integers(0, 3)) == 0
    if corpus:
        lines = "\n".join(f"Sentence {i} of the proxy corpus." for i in range(40)).encode()
        c.add(Drawn("s.txt", (FileSpec("s.txt", data=lines),), False, "corpus"), "--corpus")
    elif c.hostile():
        syn = draw(st.sampled_from(BAD_SYNTHETIC))
        c.argv += ["--synthetic", *syn]
        c.refuse.append(f"--synthetic {' '.join(syn)}")
    else:
        c.argv += ["--synthetic", *draw(st.sampled_from(SYNTHETIC))]
    c.opt("--trials", ("64",), ("-1", str(10**15)), odd=("0",))
    c.opt("--attack", ("16",), ("-1",), odd=("0",))
    c.opt("--candidates", ("4",), ("0", "-1"))
    c.opt("--T", ("2",), ("0",))
    c.opt("--etas", ("0.1",), ("nan", "-1"), odd=("2", "0"))
    c.opt("--channels", (None,), odd=("0", "100", "1"))
    c.opt("--n-cells", (None,), odd=("0", "1", "2"))
    c.opt("--context", (None, "0"), ("100000",), odd=("-1",))
    c.opt("--seed", (None, "0"), (str(2**64),), odd=("-1",))
    c.opt("--kind", (None,), ("bogus",), odd=("cells", "interval"))
    if corpus:  # the text checks run on sentences only
        c.opt("--deletion-rates", (None, "0.2"), ("0", "1", "nan", "-0.1", "x", "inf"), odd=("0.999", "1e-9"))
        c.opt("--text-sentences", (None, "8"), ("0", "-1", "100000", str(2**64)), odd=("1",))
    elif c.hostile():
        c.argv += ["--deletion-rates", "0.1"]
        c.refuse.append("--deletion-rates without --corpus")
    c.flag("--strict")
    c.out_dir("--out", {}, "vp")
    c.flag("--force")
    c.argv += ["--", proxy]
    return c.build()


#: The strategies of this module, by subcommand.
REPORT_STRATEGIES = {
    "calibrate": calibrate_cases,
    "calibrate-simmark": calibrate_simmark_cases,
    "evaluate": evaluate_cases,
    "check": check_cases,
    "validate-proxy": validate_proxy_cases,
}
