"""Data parallelism over processes with an existing launcher (``torchrun``, ``accelerate launch``), issue 14.

Each process reads its rank and the world size from the environment the launcher sets (``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``), takes the documents ``rank, rank + size, …`` of every run, and writes their unit files into the
shared report folder; rank 0 merges them into the report once every rank is done. No scheduler of our own: the
only collective operations are a barrier and an all-reduce of an error flag (``torch.distributed``, gloo, which
runs on CPUs and beside CUDA), so a rank that fails makes every rank stop with an error instead of waiting.
Without a launcher (``WORLD_SIZE`` unset or 1) nothing is initialised.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from pmark_theory._validate import PMarkValueError

__all__ = ["World", "agree", "agreed_min", "barrier", "finish", "start", "world_from_env"]


@dataclass(frozen=True)
class World:
    """This process's place: ``rank`` of ``size`` processes, ``local_rank`` on its machine (its GPU index)."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def distributed(self) -> bool:
        return self.size > 1

    def shard(self, n: int) -> range:
        """The indices ``0 <= i < n`` this rank takes: ``rank, rank + size, …``."""
        return range(self.rank, n, self.size)

    def shard_groups(self, n: int, group: int) -> list[range]:
        """The groups of ``group`` consecutive indices ``0 <= i < n`` this rank takes (group ``g`` =
        ``g·group … g·group + group − 1``; groups ``rank, rank + size, …``): fixed by index, so what shares a
        batch never depends on the number of processes."""
        starts = range(0, n, group)
        return [range(lo, min(lo + group, n)) for lo in starts[self.rank :: self.size]]


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise PMarkValueError(f"environment variable {name} must be an integer, got {raw!r}") from None


def world_from_env(env: Mapping[str, str] | None = None) -> World:
    """The :class:`World` described by ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK`` (defaults 0, 1, 0).

    Raises:
      PMarkValueError: a value that is not an integer, ``WORLD_SIZE < 1`` or ``RANK`` outside ``[0, size)``.
    """
    env = os.environ if env is None else env
    size = _int(env, "WORLD_SIZE", 1)
    rank = _int(env, "RANK", 0)
    local = _int(env, "LOCAL_RANK", rank)
    if size < 1 or not 0 <= rank < size or local < 0:
        raise PMarkValueError(f"bad launcher environment: RANK={rank}, WORLD_SIZE={size}, LOCAL_RANK={local}")
    return World(rank, size, local)


def start(world: World) -> None:
    """Join the process group (gloo) when the world has several processes; no-op otherwise."""
    if not world.distributed:
        return
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("gloo", rank=world.rank, world_size=world.size)


def barrier(world: World) -> None:
    """Wait for every rank."""
    if world.distributed:
        import torch.distributed as dist

        dist.barrier()


def agree(world: World, ok: bool) -> bool:
    """``True`` iff ``ok`` holds on every rank (an all-reduce of the flag; a barrier too)."""
    if not world.distributed:
        return ok
    import torch
    import torch.distributed as dist

    flag = torch.tensor([1 if ok else 0], dtype=torch.int64)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())


def agreed_min(world: World, value: int) -> int:
    """The smallest of every rank's ``value`` (an all-reduce; a barrier too): one group size for all ranks, whose
    devices may differ (issue 40)."""
    if not world.distributed:
        return int(value)
    import torch
    import torch.distributed as dist

    out = torch.tensor([int(value)], dtype=torch.int64)
    dist.all_reduce(out, op=dist.ReduceOp.MIN)
    return int(out.item())


def finish(world: World) -> None:
    """Leave the process group."""
    if world.distributed:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
