"""What both engines' timed loops share: the phases, the rounds, the log line.

Apart from ``train.loop`` (ChainerMN's loop), so that the PyTorch engine and the
document import them without importing Chainer.
"""

from __future__ import annotations

PHASES = ("compute", "wait", "allreduce", "update")


def log(rank: int, msg: str) -> None:
    if rank == 0:
        print(f"train: {msg}", flush=True)


def chunk_sizes(iterations: int, rounds: int) -> list[int]:
    return [iterations // rounds + (1 if i < iterations % rounds else 0) for i in range(rounds)]
