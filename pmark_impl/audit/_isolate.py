"""The audit runs in a child process: no behaviour of the target can produce the passing status (issue 36).

A target is arbitrary code. One that calls ``os._exit(0)`` (or ``exec``s another program) inside ``pmark audit``
ended the process with the status that means "every claimed guarantee holds", with no report. :func:`isolated`
runs a piece of the audit in a **forked child**: the child sends its result back through a pipe, tagged with a
random nonce the parent drew, and the parent accepts it only if the message is whole, carries that nonce, and the
child then exited with status 0. Anything else — the child exited or was killed before it answered — is a
:class:`~pmark_impl.audit._target.TargetError` (exit 2): never a pass. An exception in the child is sent back and
raised again in the parent (a ``KeyboardInterrupt`` stays one; one that cannot be pickled becomes an
:class:`AuditProcessError` with its type and message). The child inherits everything the parent holds (the world,
a plug-in registered in a test, a monkeypatch) and its threads die with it, a hung call's included. The pipe
carries framed messages: progress calls (forwarded, so that a caller's ``progress`` callback runs in the caller's
process) and, last, the result.

A fork is not always safe. JAX's CPU runtime and CUDA do not survive one (a child that computes with them after
the parent did deadlocks or fails), so when either is already initialised in this process (a test session that
generated text first, a notebook) :func:`isolated` runs the work **in this process** instead, under
:func:`exit_guard`: ``os._exit`` and the ``os.exec*`` functions raise a ``TargetError`` for the duration, so a
target that calls them from Python is still refused (one that ends the process from C is not: run ``pmark
audit`` from a shell, whose process is always forked). The same holds without ``os.fork`` (Windows).

PyTorch's CPU thread pool does not survive a fork either: the child computes on one thread, unless the parent
had not imported PyTorch when :func:`parent_threads` was entered (``pmark audit`` in a new process), in which case
the parent computes on one thread while it builds the world and the child gets the usual count.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import secrets
import signal
import sys
import traceback
import warnings
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from pmark_impl.audit._guard import TargetError
from pmark_theory._validate import PMarkValueError

__all__ = ["AuditProcessError", "exit_guard", "fork_safe", "isolated", "parent_threads"]

_T = TypeVar("_T")
#: Functions that end or replace the process, refused while an in-process audit runs (:func:`exit_guard`).
_EXITS = ("_exit", "execl", "execle", "execlp", "execlpe", "execv", "execve", "execvp", "execvpe")
#: Torch threads the child may use (set by :func:`parent_threads`; 1 when the parent's pool may be running).
_CHILD_THREADS = {"n": 1}


class AuditProcessError(RuntimeError):
    """An error raised in the audit's process that could not be sent back as itself (its type and message).

    Attributes:
      type_name: the original exception's type.
    """

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(f"{type_name}: {message}" if message else type_name)
        self.type_name = type_name


def fork_safe() -> bool:
    """Whether :func:`isolated` may fork: POSIX, and neither JAX's runtime nor CUDA initialised in this process."""
    if not hasattr(os, "fork"):
        return False
    if "jax" in sys.modules:
        try:
            from jax._src import xla_bridge

            if xla_bridge.backends_are_initialized():
                return False
        except Exception:  # another JAX version: assume its runtime may be running
            return False
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_initialized():
                return False
        except Exception:
            return False
    return True


@contextlib.contextmanager
def parent_threads() -> Iterator[None]:
    """While the parent builds the world: one torch thread if torch is not yet imported, so that the forked child
    may use the usual count (a thread pool the parent never started cannot be stale in the child)."""
    if "torch" in sys.modules:
        _CHILD_THREADS["n"] = 1
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    _CHILD_THREADS["n"] = before
    try:
        yield
    finally:
        torch.set_num_threads(before)
        _CHILD_THREADS["n"] = 1


@contextlib.contextmanager
def exit_guard(name: str) -> Iterator[None]:
    """``os._exit`` and ``os.exec*`` raise :class:`TargetError` instead of ending this process (in-process audits)."""
    saved: dict[tuple[Any, str], Any] = {}

    def refuse(fn_name: str) -> Callable[..., Any]:
        def refused(*args: Any, **kwargs: Any) -> Any:
            raise TargetError(
                f"audit target {name}: called os.{fn_name}(), which would end the audit without a report"
            )

        return refused

    # os._exit is posix._exit (nt._exit on Windows): a target may name either
    for module in [os, *(sys.modules[n] for n in ("posix", "nt") if n in sys.modules)]:
        for fn_name in _EXITS:
            if hasattr(module, fn_name):
                saved[(module, fn_name)] = getattr(module, fn_name)
                setattr(module, fn_name, refuse(fn_name))
    try:
        yield
    finally:
        for (module, fn_name), fn in saved.items():
            setattr(module, fn_name, fn)


def isolated(
    work: Callable[[Callable[[str, int], None] | None], _T],
    *,
    name: str,
    progress: Callable[[str, int], None] | None = None,
) -> _T:
    """``work(progress)`` in a forked child when :func:`fork_safe`, else in this process under :func:`exit_guard`.

    Args:
      work: what to run, given the progress callback to use; its result must pickle (an
        :class:`~pmark_impl.audit.AuditReport`, a dict).
      name: the target's name, for the messages.
      progress: ``progress(part, k)``, called in THIS process: the child's calls are forwarded through the pipe.

    Returns:
      What ``work()`` returned in the child.

    Raises:
      TargetError: the child ended before it answered (the target ended the process), or said something else.
      BaseException: what ``work()`` raised in the child, raised again here.
    """
    if not fork_safe():
        with exit_guard(name), _threads(_CHILD_THREADS["n"]):
            return work(progress)
    nonce = secrets.token_hex(16)
    for stream in (sys.stdout, sys.stderr):  # nothing buffered is written twice
        with contextlib.suppress(Exception):
            stream.flush()
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():  # Python 3.12 warns on fork from a process with threads: handled above
        warnings.simplefilter("ignore")
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child (measured through the parent's tests)
        _child(work, nonce, read_end, write_end, name, progress is not None)
    os.close(write_end)
    try:
        data = _read_frames(read_end, progress)
        _, status = os.waitpid(pid, 0)
    except BaseException:  # Ctrl-C, a time limit: the child goes too
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)
        raise
    finally:
        os.close(read_end)
    return _answer(data, status, nonce, name)


@contextlib.contextmanager
def _threads(n: int) -> Iterator[None]:
    """Torch's usual thread count for in-process work while :func:`parent_threads` holds the parent at one."""
    torch = sys.modules.get("torch")
    if torch is None or n <= 1:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _frame(kind: bytes, payload: bytes) -> bytes:
    """One message of the pipe: ``kind`` (``P`` progress, ``R`` the result), its length, its bytes."""
    return kind + len(payload).to_bytes(8, "big") + payload


def _read_frames(fd: int, progress: Callable[[str, int], None] | None) -> bytes:
    """Read the pipe to its end, calling ``progress`` for each progress frame; the result frame's bytes (or
    ``b""`` when the child sent none or something else)."""
    buf, result = b"", b""
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return result if not buf else b""
        buf += chunk
        while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[1:9], "big"):
            kind, size = buf[:1], int.from_bytes(buf[1:9], "big")
            payload, buf = buf[9 : 9 + size], buf[9 + size :]
            if kind == b"R":
                result = payload
            elif kind == b"P" and progress is not None:
                part, k = pickle.loads(payload)
                progress(part, k)


def _child(
    work: Callable[[Any], Any], nonce: str, read_end: int, write_end: int, name: str, forward: bool
) -> None:
    """Run ``work`` and send the outcome; never return (``os._exit``)."""
    code = 70
    try:
        os.close(read_end)
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.set_num_threads(_CHILD_THREADS["n"])

        def progress(part: str, k: int) -> None:  # forwarded: the caller's callback runs in the parent
            os.write(write_end, _frame(b"P", pickle.dumps((str(part), int(k)))))

        try:
            message = {"nonce": nonce, "ok": True, "value": work(progress if forward else None)}
        except BaseException as exc:
            message = {"nonce": nonce, "ok": False, **_error(exc, name)}
        try:
            data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # an unpicklable result: the toolkit's bug
            data = pickle.dumps({"nonce": nonce, "ok": False, **_error(exc, name)})
        with os.fdopen(write_end, "wb") as out:
            out.write(_frame(b"R", data))
        code = 0
    except BaseException:
        code = 71
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _error(exc: BaseException, name: str) -> dict[str, Any]:
    """The exception as something that pickles: itself if it survives a round trip, else its type and message."""
    if isinstance(exc, SystemExit):  # only the target's code exits: never a status of pmark's
        exc = TargetError(
            f"audit target {name}: raised SystemExit({exc.code!r}), which would end the audit without a report"
        )
    elif os.environ.get("PMARK_DEBUG", "") not in ("", "0") and not isinstance(
        exc, (ValueError, KeyboardInterrupt)
    ):
        traceback.print_exception(exc)  # PMARK_DEBUG=1: the traceback of the audit's process
    exc.__traceback__ = None
    try:
        data = pickle.dumps(exc)
        pickle.loads(data)
        return {"error": data}
    except Exception:
        first = str(exc).strip().splitlines()
        return {
            "type": type(exc).__name__,
            "message": first[0] if first else "",
            "value_error": isinstance(exc, ValueError),
        }


def _answer(data: bytes, status: int, nonce: str, name: str) -> Any:
    message = None
    with contextlib.suppress(Exception):
        message = pickle.loads(data)
    if not isinstance(message, dict) or message.get("nonce") != nonce or status != 0:
        raise TargetError(
            f"audit target {name}: the audit's process {_ended(status)} before it answered: the target (or a "
            "library it called) ended the process, or the system did; no verdict"
        )
    if message["ok"]:
        return message["value"]
    if "error" in message:
        raise pickle.loads(message["error"])
    if message["value_error"]:
        raise PMarkValueError(f"{message['type']}: {message['message']}")
    raise AuditProcessError(message["type"], message["message"])


def _ended(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            return f"was killed by signal {sig} ({signal.Signals(sig).name})"
        except ValueError:
            return f"was killed by signal {sig}"
    return f"exited with status {os.WEXITSTATUS(status)}"
