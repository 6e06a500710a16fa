"""Issue 36's ``--force`` cases: it replaces only a file pmark wrote and recognises as its own.

Every case below replaced a file the toolkit did not write on the code the issue was filed against (commit
e03a448): the user's ``o.txt.pmark.json`` sidecar, another secret key (its mode going from 0600 to 0644), the
user's own text or JSON. Each must now be refused (exit 2) with the folder untouched. That ``--force`` still
replaces the toolkit's own outputs is tested in ``test_cli.py`` and ``test_provenance.py`` (a case here could not
fail when a command refuses everything).
"""

from __future__ import annotations

import shlex
from typing import Any

from _fuzz_assets import CORPUS, Assets
from _fuzz_harness import CliCase, FileSpec

GENERATE = "generate --key k.key --max-sentences 2 --n 4"


def force_cli_cases(assets: Assets) -> list[CliCase]:
    """The issue's destructive ``--force`` command lines, and the same rule for every single-file output."""
    key = (FileSpec("k.key", data=assets.keys["k"], mode=0o600),)
    other_key = (FileSpec("k2.key", data=assets.keys["k"], mode=0o600),)
    mine = FileSpec("o.txt.pmark.json", data=b"mine\n")
    text, record = assets.texts["offline"]
    generated = (FileSpec("gen.txt", data=text), FileSpec("gen.txt.pmark.json", data=record))
    corpus = (FileSpec("corpus.txt", data=CORPUS),)

    def case(group: str, tag: str, line: str, files: tuple[FileSpec, ...], **kw: Any) -> CliCase:
        return CliCase(group, f"issue 36: {tag}", tuple(shlex.split(line)), files, must_refuse=True, **kw)

    return [
        case("generate", "--force replaces the user's o.txt.pmark.json", f"{GENERATE} --out o.txt --force P.",
             (*key, mine)),
        case("attack", "--force replaces the user's OUT.pmark.json", "attack word-delete gen.txt --out o.txt "
             "--force", (*generated, mine)),
        case("generate", "a secret key is the text's --out", f"{GENERATE} --out k2.key --force P.", key + other_key),
        case("attack", "a secret key is the attacked text's --out", "attack word-delete gen.txt --out k.key --force",
             key + generated),
        case("attack", "a secret key is the attacked text's --out (no record)", "attack word-delete in.txt --out "
             "k.key --force", (*key, FileSpec("in.txt", data=text))),
        case("generate", "--force replaces the user's own text", f"{GENERATE} --out o.txt --force P.",
             (*key, FileSpec("o.txt", data=b"my own notes\n"))),
        case("generate", "--force replaces a text edited since pmark wrote it", f"{GENERATE} --out gen.txt --force "
             "P.", (*key, FileSpec("gen.txt", data=text + b"my edit\n"), generated[1])),
        case("generate", "--provenance --force replaces the user's JSON", f"{GENERATE} --provenance p.json --force "
             "P.", (*key, FileSpec("p.json", data=b'{"mine": true}\n'))),
        case("keygen", "--force replaces the user's file with a key", "keygen --out o.txt --encoder e --dim 8 "
             "--force", (FileSpec("o.txt", data=b"my own notes\n"),)),
        case("keygen", "--force replaces a provenance record with a key", "keygen --out gen.txt.pmark.json "
             "--encoder e --dim 8 --force", generated),
        case("calibrate", "--force replaces the user's file with a key", "calibrate k.key --out o.txt --corpus "
             "corpus.txt --accept-high-fpr --force", (*key, *corpus, FileSpec("o.txt", data=b"mine\n"))),
        case("calibrate-simmark", "--force replaces a key with a SimMark calibration", "calibrate-simmark --corpus "
             "corpus.txt --out k.key --force", key + corpus),
    ]  # fmt: skip
