"""The cases issue 24 reported and those this suite found, run as explicit examples on every run (before the drawn
ones).

Each is a :class:`~_fuzz_harness.CliCase` or :class:`~_fuzz_harness.ApiCase` judged by the same rules as the
drawn cases: the destructive ones must be refused with the user's files untouched, the silently wrong ones must
give the exact answer or a clear error, the crashes must become one-line errors. Most fail on the code the issue
was filed against (commit 419ec0b); the others (``--out /proc/x``, ``rate=0.1,0.1``, ``paraphrase-sentence
--param model=1``, online ``N = 65536`` with fake models) guard behaviour that already holds.
"""

from __future__ import annotations

import dataclasses
import math
import shlex
from pathlib import Path
from typing import Any

import numpy as np
from _fuzz_api_impl import TEXT, api_encoders, api_keys, detection_judge
from _fuzz_api_numbers import critical_judge
from _fuzz_api_theory import cp_judge, exact_log_tail
from _fuzz_assets import CORPUS, PROMPTS, SENTENCES, Assets
from _fuzz_case import VICTIMS
from _fuzz_harness import ApiCase, CliCase, FileSpec
from _fuzz_inputs import key_variants
from _fuzz_issue36_audit import audit_api_cases, audit_cli_cases
from _fuzz_issue36_force import force_cli_cases
from _fuzz_issue36_keys import keys_api_cases, keys_cli_cases
from _fuzz_issue36_plugins import plugin_cli_cases
from _fuzz_issue39 import localize_cli_cases
from _impl_fakes import FakeSampler

GENERATE = "generate --key k.key --max-sentences 2 --n 4"
EVALUATE = (
    "evaluate --quiet --oracle none --prompts prompts.txt --limit 1 --schemes offline --max-sentences 2 --n 4 "
    "--min-sentences 2"
)
CHECK = "check --only C4 --quick --budget 0.01 --no-progress"
#: ``k = n // 3`` at ``n = 2**63 - 1``: the interval came out inverted (lo > hi).
N_THIRD = (2**63 - 1) // 3
#: A folder of the user's: neither an evaluation nor a report of the toolkit.
USER_DIR = (
    FileSpec("DIR", "dir"),
    FileSpec("DIR/config.json", data=b'{"my": "config"}\n'),
    FileSpec("DIR/report.md", data=b"# my report\n"),
    FileSpec("DIR/results.json", data=b'{"mine": true}\n'),
    FileSpec("DIR/figures/chart.png", data=b"\x89PNG my chart"),
    FileSpec("DIR/deep/er/x.tmp", data=b"my temporary notes"),
)


def issue_cli_cases(assets: Assets) -> dict[str, list[CliCase]]:
    """``group -> cases`` of the issue's command lines."""
    key = (FileSpec("k.key", data=assets.keys["k"], mode=0o600),)
    prompts = (FileSpec("prompts.txt", data=PROMPTS),)
    text = (FileSpec("in.txt", data=TEXT.encode()),)
    online_65536 = assets.texts["online"][1].replace(b'"n_candidates": 16', b'"n_candidates": 65536')
    record = (
        FileSpec("gen.txt", data=assets.texts["online"][0]),
        FileSpec("gen.txt.pmark.json", data=online_65536),
    )

    def case(tag: str, line: str, files: tuple[FileSpec, ...] = (), **kw: Any) -> CliCase:
        argv = tuple(shlex.split(line))
        return CliCase(argv[0], f"issue 24: {tag}", argv, files, **kw)

    new_key = {"outputs": ("n.key",), "secret_outputs": ("n.key",), "followup": ("key_loads", "n.key")}
    cases = [
        case("--out KEY --force replaces the key", f"{GENERATE} --out k.key --force P.", key, must_refuse=True),
        case("--provenance KEY --force", f"{GENERATE} --provenance k.key --force P.", key, must_refuse=True),
        case("--out X --provenance X --force", f"{GENERATE} --out x --provenance x --force P.", key, must_refuse=True),
        case("--out X --provenance X writes, then fails", f"{GENERATE} --out x --provenance x P.", key, must_refuse=True),
        case("--lsh-dim 31 asks JAX for 52 GB", f"{GENERATE} --mode semstamp --lsh-dim 31 P.", key),
        case("--out /proc/x is checked first", f"{GENERATE} --out /proc/pmark-x/t P.", key, must_refuse=True),
        case("--force deletes the user's files", f"{EVALUATE} --attack none --out DIR --force", prompts + USER_DIR,
             outputs=("DIR",)),
        case("rate=0.1;rate=0.2 keeps only 0.2", f"{EVALUATE} --attack 'word-delete:rate=0.1;rate=0.2' --out ev",
             prompts, outputs=("ev",), must_refuse=True),
        case("rate=0.1,0.1 runs twice", f"{EVALUATE} --attack word-delete:rate=0.1,0.1 --out ev", prompts,
             outputs=("ev",), must_refuse=True),
        case("a plug-in attack", f"{EVALUATE} --attack shutil:rmtree --out ev", prompts + VICTIMS, outputs=("ev",),
             must_refuse=True),
        case("--force on a folder that is not a report", f"{CHECK} --out DIR --force", USER_DIR, outputs=("DIR",)),
        case("shutil:rmtree runs on the text", "attack shutil:rmtree in.txt",
             (*VICTIMS, FileSpec("in.txt", data=b"victim")), must_refuse=True),
        case("paraphrase-sentence --param model=1", "attack paraphrase-sentence --param model=1 in.txt", text),
        case("a repeated --param", "attack word-delete --param rate=0.1 --param rate=0.2 in.txt", text,
             must_refuse=True),
        case("an encoder name with a newline", "keygen --out n.key --encoder 'a\nb' --dim 32", **new_key),
        case("an encoder name of 1,100 characters", f"keygen --out n.key --encoder {'e' * 1100} --dim 32", **new_key),
        case("--out dir/ writes a file named dir", "keygen --out dir/ --encoder e --dim 32", must_refuse=True),
        case("a key with a duplicated secret", "detect --key k.key in.txt",
             key_variants(assets)["duplicate-secret"][0] + text, must_refuse=True),
        case("a record with online N = 65536", "detect --key k.key gen.txt", key + record),
    ]  # fmt: skip
    cases += found_cli_cases(assets)
    cases += force_cli_cases(assets) + plugin_cli_cases(assets) + keys_cli_cases(assets)  # issue 36
    cases += audit_cli_cases(assets)
    cases += localize_cli_cases(assets)  # issues 37 and 39
    by_group: dict[str, list[CliCase]] = {}
    for c in cases:
        by_group.setdefault(c.group, []).append(c)
    return by_group


def found_cli_cases(assets: Assets) -> list[CliCase]:
    """Classes this suite found on the code the issue was filed against, beyond the issue's list."""
    key = (FileSpec("k.key", data=assets.keys["k"], mode=0o600),)
    corpus = (FileSpec("corpus.txt", data=CORPUS),)
    prompts = (FileSpec("prompts.txt", data=PROMPTS),)
    text = (FileSpec("in.txt", data=TEXT.encode()),)
    real_dir = tuple(dataclasses.replace(f, path="real" + f.path[3:]) for f in USER_DIR)
    proxy = "validate-proxy --synthetic 50 8 --trials 64 --attack 16 --candidates 4 --T 2 --etas 0.1"

    def case(tag: str, line: str, files: tuple[FileSpec, ...] = (), **kw: Any) -> CliCase:
        argv = tuple(shlex.split(line))
        return CliCase(argv[0], f"found: {tag}", argv, files, **kw)

    return [
        case("the record TEXT.pmark.json replaces a key of that name",
             "generate --key out.txt.pmark.json --max-sentences 2 --n 4 --out out.txt --force P.",
             (FileSpec("out.txt.pmark.json", data=assets.keys["k"], mode=0o600),), must_refuse=True),
        case("--provenance hard-linked to the prompt file", f"{GENERATE} --prompt-file p.txt --provenance prov.json "
             "--force", (*key, FileSpec("p.txt", data=b"P."), FileSpec("prov.json", "hardlink", target="p.txt")),
             must_refuse=True),
        case("--out = the input text", "attack --out in.txt --force word-delete in.txt", text, must_refuse=True),
        case("--out = the key", "calibrate k.key --out k.key --corpus corpus.txt --accept-high-fpr --force",
             key + corpus, must_refuse=True),
        case("--out = the corpus", "calibrate-simmark --corpus corpus.txt --out corpus.txt --force", corpus,
             must_refuse=True),
        case("--out hard-linked to the corpus", "keygen --centroid-corpus corpus.txt --n-clusters 2 --encoder e "
             "--out new.key --force", (*corpus, FileSpec("new.key", "hardlink", target="corpus.txt")),
             must_refuse=True),
        case("a ksemstamp setting refused after the folder is written", f"{EVALUATE} --schemes ksemstamp --attack "
             "none --key k.key --out ev", (*prompts, FileSpec("k.key", data=assets.keys["cent"], mode=0o600)),
             outputs=("ev",)),
        case("a user's folder refused, but a lock file left in it", f"{EVALUATE} --attack none --out DIR",
             prompts + USER_DIR, outputs=("DIR",)),
        case("--force through a symbolic link to a user's folder", f"{CHECK} --out DIR --force",
             (*real_dir, FileSpec("DIR", "symlink", target="real")), outputs=("DIR", "real")),
        case("--force on a user's folder", f"{proxy} --out DIR --force -- builtin:pmark", USER_DIR,
             outputs=("DIR",)),
        case("--report --force on a user's folder", "calibrate k.key --out new.key --corpus corpus.txt "
             "--accept-high-fpr --report DIR --force", key + corpus + USER_DIR, outputs=("DIR", "new.key")),
        case("--seed 2**64", f"{proxy} --seed {2**64} --out vp -- builtin:pmark", outputs=("vp",), must_refuse=True),
        case("an unregistered proxy plug-in runs", f"{proxy} --out vp -- _fuzz_plugins:write_sentinel", VICTIMS,
             outputs=("vp",), must_refuse=True),
    ]  # fmt: skip


def issue_api_cases() -> list[ApiCase]:
    """The issue's API calls."""
    import pmark_impl
    from pmark_impl.keys import WatermarkKey, load_key, save_key
    from pmark_theory import (
        clopper_pearson,
        critical_count,
        hard_count_log_pvalue,
        hd_median,
        hd_weights,
        proportion,
    )

    key, encoder = api_keys()["key"][0], api_encoders()["encoder"][0]
    exact = exact_log_tail(1100, 1100)
    dummy_key_file = (FileSpec("k.key", data=b"{}", mode=0o600),)

    def log_judge(v: Any, _f: Path) -> list[str]:
        return (
            []
            if math.isclose(float(v), exact, rel_tol=1e-9)
            else [f"hard_count_log_pvalue(1100, 1100) = {v!r}"]
        )

    def not_a_list(t: str) -> Any:
        return "a. b."

    detected = detection_judge(False, 1)
    return [
        ApiCase("api:hard_count_log_pvalue", "hard_count_log_pvalue(1100, 1100)",
                lambda _f: hard_count_log_pvalue(1100, 1100), log_judge),
        ApiCase("api:clopper_pearson", "clopper_pearson(10**29, 10**30)", lambda _f: clopper_pearson(10**29, 10**30),
                cp_judge(10**29, 10**30, 0.95)),
        ApiCase("api:clopper_pearson", "clopper_pearson((2**63 - 1) // 3, 2**63 - 1)",
                lambda _f: clopper_pearson(N_THIRD, 2**63 - 1), cp_judge(N_THIRD, 2**63 - 1, 0.95)),
        ApiCase("api:hd_median", "hd_median(np.array([1 + 2j, 3]))", lambda _f: hd_median(np.array([1 + 2j, 3])),
                must_raise=True),
        ApiCase("api:detect", "detect(key, b'The cat sat.', encoder)",
                lambda _f: pmark_impl.detect(key, b"The cat sat.", encoder), detected, must_raise=True),
        ApiCase("api:detect", "detect(key, ['a.', 5, None], encoder)",
                lambda _f: pmark_impl.detect(key, ["a.", 5, None], encoder), detected, must_raise=True),
        ApiCase("api:detect", "detect(None, TEXT, encoder)", lambda _f: pmark_impl.detect(None, TEXT, encoder),
                must_raise=True),
        ApiCase("api:detect", "detect('k.key', TEXT, encoder)", lambda _f: pmark_impl.detect("k.key", TEXT, encoder),
                must_raise=True, files=dummy_key_file),
        ApiCase("api:detect", "detect(key, None, encoder)", lambda _f: pmark_impl.detect(key, None, encoder),
                must_raise=True),
        ApiCase("api:detect", "detect(key, TEXT, encoder, splitter=lambda t: 'a. b.')",
                lambda _f: pmark_impl.detect(key, TEXT, encoder, splitter=not_a_list), detected, must_raise=True),
        ApiCase("api:generate", "generate(key, None, encoder, 'P.')",
                lambda _f: pmark_impl.generate(key, None, encoder, "P."), must_raise=True),
        ApiCase("api:load_key", "load_key(b'k.key')", lambda _f: load_key(b"k.key"), files=dummy_key_file,
                must_raise=True),
        # found by this suite
        ApiCase("api:theory", "critical_count(2**63 - 1, 0.01)", lambda _f: critical_count(2**63 - 1, 0.01),
                critical_judge(2**63 - 1, 0.01)),
        ApiCase("api:hd_median", "hd_weights(2**63 - 1)", lambda _f: hd_weights(2**63 - 1), must_raise=True),
        ApiCase("api:hd_median", "hd_median([10**400])", lambda _f: hd_median([10**400]), must_raise=True),
        ApiCase("api:clopper_pearson", "proportion(5 * 10**39, 10**40, 1e-9)",
                lambda _f: proportion(5 * 10**39, 10**40, 1e-9),
                lambda v, f: cp_judge(5 * 10**39, 10**40, 1e-9)((v.lo, v.hi), f)),
        ApiCase("api:generate", "generate(key, sampler, encoder, 'P.', mode='offline', n_candidates=10**30)",
                lambda _f: pmark_impl.generate(key, FakeSampler(SENTENCES), encoder, "P.", mode="offline",
                                               n_candidates=10**30),
                must_raise=True),
        ApiCase("api:theory", "critical_count(10**30, 0.01)", lambda _f: critical_count(10**30, 0.01),
                must_raise=True),
        ApiCase("api:save_key", "save_key(key, 'new.key/')  (a trailing slash names a directory)",
                lambda f: save_key(key, str(f / "new.key") + "/"), must_raise=True),
        ApiCase("api:save_key", "save_key(WatermarkKey(bytes(32), 'e' * 1100, 32, 4), 'n.key')",
                lambda f: save_key(WatermarkKey(bytes(32), "e" * 1100, 32, 4), f / "n.key"),
                lambda v, f: [] if _loads(v) else ["save_key wrote a key that load_key refuses"]),
        *keys_api_cases(),  # issue 36
        *audit_api_cases(),
    ]  # fmt: skip


def _loads(path: Any) -> bool:
    from pmark_impl.keys import load_key

    try:
        load_key(path)
    except ValueError:
        return False
    return True
