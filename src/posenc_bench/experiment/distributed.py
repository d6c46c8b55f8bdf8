"""Data-parallel training under ``torchrun``: one process per device, same entry point.

``torchrun --nproc_per_node N -m posenc bench ...`` sets ``WORLD_SIZE``/``RANK``/``LOCAL_RANK``;
:func:`init_world` then joins the process group (NCCL on GPU, gloo on CPU). Each rank
trains on its shard of every epoch (``DistributedSampler``), gradients are averaged by
``DistributedDataParallel``, every rank evaluates the full validation and test sets (so
early-stopping decisions agree without communication), and only rank 0 writes files.
Without those variables the world is a single process and nothing is initialised.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn


@dataclass(frozen=True)
class World:
    """The process's place among data-parallel workers (``size == 1``: not distributed)."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        """Whether this process writes files and prints (rank 0)."""
        return self.rank == 0

    def barrier(self) -> None:
        """Wait for every rank (no-op in a single process)."""
        if self.size > 1:
            dist.barrier()


def init_world() -> World:
    """Join the ``torchrun`` process group if ``WORLD_SIZE > 1`` (NCCL with CUDA, else gloo)."""
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if size <= 1:
        return World()
    world = World(rank=int(os.environ["RANK"]), size=size, local_rank=int(os.environ.get("LOCAL_RANK", "0")))
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
    return world


def shutdown(world: World) -> None:
    """Leave the process group joined by :func:`init_world`."""
    if world.size > 1 and dist.is_initialized():
        dist.destroy_process_group()


def select_device(preference: str | None, world: World) -> torch.device:
    """``preference`` if given (``"cpu"``, ``"cuda"``, ``"cuda:1"``), else CUDA when available, else CPU.

    Under ``torchrun`` with CUDA each rank takes ``cuda:LOCAL_RANK``.
    """
    if preference is not None:
        device = torch.device(preference)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device {preference!r} requested but CUDA is not available; use 'cpu'")
        return device
    if torch.cuda.is_available():
        return torch.device("cuda", world.local_rank)
    return torch.device("cpu")


def wrap_model(model: nn.Module, world: World, device: torch.device) -> nn.Module:
    """``DistributedDataParallel(model)`` when distributed, else ``model`` itself."""
    if world.size == 1:
        return model
    device_ids = [device.index] if device.type == "cuda" else None
    return nn.parallel.DistributedDataParallel(model, device_ids=device_ids)
