"""``pmark validate-proxy``: run the battery on a proxy and write the report (issue #6).

    pmark validate-proxy builtin:pmark --synthetic 2000 64 1.0 0.2 --channels 4 --out proxy-report
    pmark validate-proxy mypkg.proxies:my_proxy --corpus sentences.txt --out proxy-report --force

``PROXY`` is ``builtin:NAME`` (``pmark``, ``semstamp``, ``ksemstamp``, ``simmark``) or ``module:attribute``
(``path/to/file.py:attribute`` works too; the current directory is importable). The attribute is a
:class:`~proofs_checks.validate.Proxy`, or a function ``embeddings [n, d] -> [n, b]`` used as a proxy of kind
``--kind`` (default continuous; ``--n-cells`` for cells, ``--interval LO HI`` for interval).

With ``--corpus`` the text checks run too (issue 28): word deletion on the corpus sentences through the same
encoder, against the geometry's prediction for the measured ``η`` (``--deletion-rates``, ``--text-sentences``),
and each channel's correlation with sentence length.

Without ``--candidates`` the ``N`` values are the multiples of ``2**b`` among 16, 32, 64 (``2**b`` itself for
``b = 7, 8``), so a default run never raises the battery's own ``inadmissible_N`` flag (issue 38). In the report
an exact value reads ``0.4355 (exact)`` (no zero-width interval), and a power that is 0 by construction (the
smallest p-value ``2**-(bT)`` exceeds ``α``, e.g. ``T = 1`` at ``b = 4``) reads ``0 — unattainable†`` with the
reason below the table.

Exit codes: 0 the report was written and nothing is flagged as an error (with ``--strict``: no error and no
warning); 1 the report was written and the proxy has error flags (with ``--strict``: error or warning flags, e.g.
``length_bias`` or ``text_fragile``; ``info`` flags never count); 2 a usage or input error (one line on stderr,
no traceback).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np

from pmark_theory._validate import PMarkValueError
from proofs_checks._cli_common import MAX_SEED, int_in_range
from proofs_checks.validate._battery import (
    DEFAULT_ETAS,
    DEFAULT_N_CANDIDATES,
    DEFAULT_T,
    SIZE_LIMITS,
    validate_proxy,
)
from proofs_checks.validate._proxies import BUILTIN_PROXIES, PROXY_KINDS, Proxy, builtin_proxy, make_proxy
from proofs_checks.validate._report import check_report_dir, write_proxy_report
from proofs_checks.validate._text import DEFAULT_DELETION_RATES, DEFAULT_TEXT_SENTENCES

__all__ = ["SYNTHETIC_FIELDS", "main", "parse_synthetic", "read_corpus", "resolve_proxy"]

PROG = "pmark validate-proxy"
#: ``--synthetic`` fields in positional order, with defaults: sentences K, dimension d, Dirichlet α, cluster
#: weight ρ (0 = isotropic), sentences of mass exactly 0.
SYNTHETIC_FIELDS = {"K": 2000, "d": 64, "alpha": 1.0, "rho": 0.0, "zeros": 0}


class UsageError(Exception):
    """A user error: reported as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, no usage dump
        raise UsageError(message)


class _Embedded:
    """The corpus's embeddings computed once; other texts (attacked sentences) go to the real encoder."""

    def __init__(
        self, embeddings: np.ndarray, sentences: list[str] | None = None, encoder: Any = None
    ) -> None:
        self.embeddings, self.sentences, self.encoder = embeddings, sentences, encoder

    def encode(self, texts: list[str]) -> np.ndarray:
        if self.encoder is None or list(texts) == self.sentences:
            return self.embeddings
        return self.encoder.encode(list(texts))


def _probability(text: str) -> float:
    """An argparse ``type=``: a word-deletion probability in the open interval (0, 1)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a probability in (0, 1), got {text[:40]!r}") from None
    if not 0.0 < value < 1.0:  # NaN fails too
        raise argparse.ArgumentTypeError(f"must be a probability in (0, 1), got {text[:40]!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog=PROG,
        description="Validate a proxy function: distortion (exact TV), robustness, evidence and detector power "
        "(with --corpus also word deletion and sentence-length bias), with a report (report.md, results.json, "
        "figures/). Exit 0: no error flags (--strict: no error or warning flags); 1: such flags; 2: usage error.",
    )
    p.add_argument("proxy", help="builtin:NAME (" + ", ".join(BUILTIN_PROXIES) + ") or module:attribute")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--corpus", type=Path, metavar="FILE", help="UTF-8 text, one sentence per line (needs the encoder)"
    )
    src.add_argument(
        "--synthetic",
        nargs="*",
        metavar="SPEC",
        help="finite universe: positional K d alpha rho zeros (defaults 2000 64 1.0 0.0 0) or name=value",
    )
    p.add_argument(
        "--channels", type=int, help="b for pmark (default 4), LSH bits h for semstamp (default 3)"
    )
    p.add_argument("--n-cells", type=int, help="cells M of ksemstamp (default 8) or of a cells proxy")
    p.add_argument(
        "--interval", type=float, nargs=2, metavar=("LO", "HI"), help="interval G (simmark: 0.68 0.76)"
    )
    p.add_argument(
        "--context",
        type=int,
        default=0,
        help="simmark: index of the sentence used as the previous one (default 0)",
    )
    p.add_argument("--kind", choices=PROXY_KINDS, default="continuous", help="kind of a plain proxy function")
    p.add_argument(
        "--candidates",
        type=int,
        nargs="+",
        default=None,
        metavar="N",
        help="candidate counts N (default: the multiples of 2^b among "
        + " ".join(map(str, DEFAULT_N_CANDIDATES))
        + ", so online PMark's N %% 2^b == 0 holds at every default N)",
    )
    p.add_argument("--etas", type=float, nargs="+", default=list(DEFAULT_ETAS), metavar="ETA")
    p.add_argument("--T", type=int, nargs="+", default=list(DEFAULT_T), metavar="T", dest="T")
    p.add_argument("--trials", type=int, default=8192, help="simulated outputs per scheme (default 8192)")
    p.add_argument("--attack", type=int, default=1024, help="sentences attacked per budget (default 1024)")
    p.add_argument("--encoder", default=None, help="encoder name or path passed to the encoder factory")
    p.add_argument(
        "--deletion-rates",
        type=_probability,
        nargs="+",
        default=None,
        metavar="P",
        help="--corpus: word-deletion probabilities in (0, 1) (default "
        + " ".join(f"{v:g}" for v in DEFAULT_DELETION_RATES)
        + ")",
    )
    p.add_argument(
        "--text-sentences",
        type=int_in_range(1, SIZE_LIMITS["n_text"]),
        default=None,
        metavar="N",
        help=f"--corpus: sentences attacked by word deletion (default {DEFAULT_TEXT_SENTENCES})",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when any error or warning flag is raised (length bias, fragile on text, distortion, ...)",
    )
    p.add_argument(
        "--out", type=Path, default=Path("proxy-report"), help="report directory (default ./proxy-report)"
    )
    p.add_argument("--force", action="store_true", help="overwrite an existing report directory")
    p.add_argument(
        "--seed", type=int_in_range(0, MAX_SEED), default=0, help=f"seed, 0..{MAX_SEED} (default 0)"
    )
    return p


def parse_synthetic(tokens: list[str]) -> dict[str, float]:
    """``--synthetic`` tokens (positional in :data:`SYNTHETIC_FIELDS` order, or ``name=value``) -> values.

    Raises:
      UsageError: unknown name, too many values, or a value that is not a number.
    """
    spec = dict(SYNTHETIC_FIELDS)
    names = list(SYNTHETIC_FIELDS)
    for i, tok in enumerate(tokens):
        if "=" in tok:
            name, val = tok.split("=", 1)
        elif i < len(names):
            name, val = names[i], tok
        else:
            raise UsageError(f"--synthetic takes at most {len(names)} positional values ({' '.join(names)})")
        if name not in spec:
            raise UsageError(f"--synthetic: unknown field {name!r}; fields are {' '.join(names)}")
        try:
            v = float(val)
        except ValueError:
            raise UsageError(f"--synthetic: {name} must be a number, got {val!r}") from None
        if isinstance(SYNTHETIC_FIELDS[name], int):
            if v != int(v):
                raise UsageError(f"--synthetic: {name} must be an integer, got {val!r}")
            v = int(v)
        spec[name] = v
    return spec


def read_corpus(path: Path) -> list[str]:
    """Sentences of a UTF-8 file, one per line (blank lines skipped).

    Raises:
      UsageError: missing file, not a regular file, over the size limit, invalid UTF-8 (with the byte offset),
        NUL bytes, or no sentence.
    """
    from pmark_theory.infra.files import TEXT_LIMIT_BYTES, UserFileError, read_text_file

    try:  # at most TEXT_LIMIT_BYTES, regular files only, never blocking on a FIFO, UTF-8 with the byte offset
        text = read_text_file(str(path), limit=TEXT_LIMIT_BYTES, what="--corpus")
    except UserFileError as exc:
        raise UsageError(str(exc)) from None
    lines = [ln.strip() for ln in text.lstrip("\ufeff").splitlines()]
    sentences = [ln for ln in lines if ln]
    if not sentences:
        raise UsageError(f"--corpus {path} is empty: no non-blank line")
    return sentences


def _import_attr(spec: str) -> Any:
    """The object ``spec`` names (``module:attr`` or ``file.py:attr``), refused unless it is a registered proxy.

    A proxy is registered when it is a :class:`Proxy` (built with :func:`make_proxy`, which only a proxy's author
    does), a function marked ``@plugin("proxy")``, or the target of an entry point of ``pmark.proxies``
    (:mod:`pmark_theory.infra.plugins`). Importing the module runs its top-level code (unavoidable); the standard
    library is refused before any import, and nothing is called before the check (issue 24).
    """
    from pmark_theory.infra.plugins import how_to_register, is_plugin, plugin_entry_points

    mod_name, _, attr = spec.rpartition(":")
    if not mod_name or not attr:
        raise UsageError(f"proxy must be builtin:NAME or module:attribute, got {spec!r}")
    top = Path(mod_name).stem if mod_name.endswith(".py") else mod_name.split(".")[0]
    if not mod_name.endswith(".py") and (top in sys.stdlib_module_names or top in sys.builtin_module_names):
        raise UsageError(
            f"proxy {spec} is refused: {top} is part of the Python standard library; {how_to_register('proxy')}"
        )
    obj = _load_attr(mod_name, attr)
    declared = any(spec in targets for targets in plugin_entry_points("proxy").values())
    if not (isinstance(obj, Proxy) or is_plugin(obj, "proxy") or declared):
        raise UsageError(
            f"proxy {spec} is refused: it is not registered as a proxy; {how_to_register('proxy')}, "
            "or build it with proofs_checks.validate.make_proxy"
        )
    return obj


def _load_attr(mod_name: str, attr: str) -> Any:
    try:
        if mod_name.endswith(".py"):
            path = Path(mod_name)
            if not path.is_file():
                raise UsageError(f"proxy module file {mod_name} does not exist")
            sp = importlib.util.spec_from_file_location(path.stem, path)
            module = importlib.util.module_from_spec(sp)
            sp.loader.exec_module(module)
        else:
            cwd = str(Path.cwd())
            added = cwd not in sys.path
            if added:
                sys.path.insert(0, cwd)
            try:
                module = importlib.import_module(mod_name)
            finally:
                if added:
                    sys.path.remove(cwd)
    except UsageError:
        raise
    except Exception as exc:
        raise UsageError(f"cannot import proxy module {mod_name!r}: {type(exc).__name__}: {exc}") from None
    if not hasattr(module, attr):
        raise UsageError(f"module {mod_name!r} has no attribute {attr!r}")
    return getattr(module, attr)


def resolve_proxy(spec: str, args: argparse.Namespace, key: jax.Array, d: int, context: Any = None) -> Proxy:
    """The :class:`Proxy` named on the command line (built-ins drawn from ``key`` for dimension ``d``)."""
    if spec.startswith("builtin:"):
        name = spec.split(":", 1)[1]
        if name not in BUILTIN_PROXIES:
            raise UsageError(f"unknown built-in proxy {name!r}; choose one of {', '.join(BUILTIN_PROXIES)}")
        interval = tuple(args.interval) if args.interval else None
        return builtin_proxy(
            name, key, d, channels=args.channels, n_cells=args.n_cells, interval=interval, context=context
        )
    obj = _import_attr(spec)
    if isinstance(obj, Proxy):
        return obj
    if not callable(obj):
        raise UsageError(f"{spec} is neither a Proxy nor a function (got {type(obj).__name__})")
    interval = tuple(args.interval) if args.interval else None
    return make_proxy(obj, name=spec, kind=args.kind, n_cells=args.n_cells, interval=interval)


def _run(argv: list[str] | None, encoder_factory: Callable[..., Any] | None) -> int:
    args = _parser().parse_args(argv)
    key = jax.random.key(args.seed)
    k_data, k_proxy, k_run = jax.random.split(key, 3)
    out = args.out
    if args.corpus is None and (args.deletion_rates is not None or args.text_sentences is not None):
        raise UsageError(
            "--deletion-rates and --text-sentences need --corpus (the text checks run on sentences)"
        )
    check_report_dir(out, args.force, what="--out")  # a foreign folder is refused even with --force
    if args.corpus is not None:
        sentences = read_corpus(args.corpus)
        if encoder_factory is None:
            raise UsageError("--corpus needs a sentence encoder, and none is available in this context")
        try:
            encoder = encoder_factory() if args.encoder is None else encoder_factory(args.encoder)
        except Exception as exc:
            raise UsageError(f"cannot load the encoder: {type(exc).__name__}: {exc}") from None
        data: Any = sentences
        emb = None
        describe = f"corpus {args.corpus} ({len(sentences)} sentences)"
    else:
        from simulations._universe import make_finite_universe

        spec = parse_synthetic(args.synthetic or [])
        rho = spec["rho"]
        if not 0.0 <= rho < 1.0:
            raise UsageError(f"--synthetic: rho must lie in [0, 1), got {rho}")
        data = make_finite_universe(
            k_data,
            int(spec["K"]),
            int(spec["d"]),
            alpha=spec["alpha"],
            n_zeros=int(spec["zeros"]),
            clusters=1 if rho > 0 else None,
            cluster_spread=1.0 - rho if rho > 0 else 0.5,
        )
        encoder, emb = None, data.embeddings
        describe = "synthetic " + " ".join(f"{k}={v:g}" for k, v in spec.items())
    if emb is None:  # embed once here (the built-ins need d, SimMark a context); the battery reuses it
        from proofs_checks.validate._battery import _prepare_data

        emb = _prepare_data(data, encoder, k_data, 2).embeddings
        encoder = _Embedded(emb, sentences, encoder)
    if not -emb.shape[0] <= args.context < emb.shape[0]:
        raise UsageError(f"--context must index one of the {emb.shape[0]} sentences, got {args.context}")
    context = emb[args.context]  # SimMark's "previous sentence"
    proxy = resolve_proxy(args.proxy, args, k_proxy, emb.shape[1], context)
    t0 = time.perf_counter()
    result = validate_proxy(
        proxy,
        data,
        key=k_run,
        n_candidates=args.candidates,
        etas=args.etas,
        T=args.T,
        n_trials=args.trials,
        n_attack=args.attack,
        encoder=encoder,
        deletion_rates=args.deletion_rates or DEFAULT_DELETION_RATES,
        n_text=args.text_sentences or DEFAULT_TEXT_SENTENCES,
    )
    meta = {
        "command": [PROG, *(argv if argv is not None else sys.argv[1:])],
        "data": describe,
        "seed": args.seed,
        "runtime_s": time.perf_counter() - t0,
    }
    report = write_proxy_report(out, result, force=args.force, meta=meta)
    for f in result.flags:
        print(f"{f.severity.upper():7s} {f.code}: {f.message}")
    verdicts = ", ".join(
        f"{k}: {'distortion-free' if v else 'distorts' if v is False else 'undefined'}"
        for k, v in (result.distortion_free or {}).items()
    )
    print(f"{proxy.name} ({proxy.kind}) on {describe}: {verdicts}; report: {report}")
    if args.strict:
        return 0 if result.clean else 1
    return 0 if result.ok else 1


def main(argv: list[str] | None = None, encoder_factory: Callable[..., Any] | None = None) -> int:
    """Entry point of ``pmark validate-proxy``.

    Args:
      argv: arguments after ``validate-proxy`` (default ``sys.argv[1:]``).
      encoder_factory: ``() -> encoder`` (or ``(name) -> encoder`` with ``--encoder``), an object with
        ``.encode(texts) -> [n, d]``; needed for ``--corpus`` (the lead passes ``pmark_impl.sampling._models.load_encoder``).

    Returns:
      0 (report written, no error flag; with ``--strict`` no error or warning flag), 1 (report written, such
      flags) or 2 (usage/input error, one line on stderr).
    """
    try:
        return _run(argv, encoder_factory)
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    except (UsageError, PMarkValueError, FileExistsError) as exc:
        print(
            f"{PROG}: error: {' '.join(str(exc).split())}", file=sys.stderr
        )  # one line, whatever the message
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
