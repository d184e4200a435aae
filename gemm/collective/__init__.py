"""Collective matmuls over a ``torch.distributed`` group, the two halves of tensor
parallelism, each overlapping its communication with its matmuls:

- :func:`all_gather_matmul`, ``AllGather(A) @ B``: A sharded by rows (rank ``r`` holds
  ``A_r``, ``m`` x ``k``), B by columns (``B_r``, ``k`` x ``n``); each rank wants the
  ``(D * m, n)`` product ``[A_0; ...; A_{D-1}] @ B_r``. Instead of gathering A first, the
  ring (:func:`ring_plan`) multiplies the shard a rank holds while the next one arrives. Two
  schedules (:data:`SCHEDULES`): ``"ring"``, the seed's, forwards each shard to the
  neighbour (D - 1 hops, each copy waiting for the one before to arrive); ``"direct"`` has
  each rank push its own shard to every other rank in turn, one permutation per step, no
  copy waiting for another. The ring is the default: the two measured alike, the copies
  being bound by bandwidth, not by the ring's chain of arrivals (benchmarks/RESULTS.md,
  "Collective matmul").
- :func:`matmul_reduce_scatter`, ``ReduceScatter(A @ B)``: A sharded by columns and B by rows
  (the K shard of each), every rank's partial product cut into D blocks of rows, each block
  sent to its rank while the next is computed (:func:`scatter_plan`), and added there in rank
  order (:mod:`gemm.collective.reduce_scatter`).

Two paths run either (:func:`ring_path` says which a call takes and why):

- ``"peer"``: every rank on one host and every pair of GPUs able to reach each other (or
  ranks sharing a GPU): the blocks move into the receiver's scratch through CUDA IPC, with a
  remote flag per copy (:mod:`gemm.collective.peer`), by the copy engines or, for
  ``transfer="sm"`` (and the all-gather's ``"sm_fused"``, :data:`TRANSFERS`), by a copy
  kernel of a few blocks storing into the peer's memory (:mod:`gemm.collective.push`);
- ``"sendrecv"``: elsewhere (or on CPU tensors with gloo), over ``torch.distributed``
  send/recv (NCCL on GPUs), each exchange overlapped with a matmul.

The per-block matmuls on GPUs are the project's kernels (:func:`gemm.matmul`: the Hopper
kernel on compute capability 9.x); on CPU tensors (the gloo test path) they are torch's in
float64. Launch one process per GPU with ``torchrun``; see ``benchmarks/collective.py`` and
``benchmarks/tp_mlp.py``.
"""

from .all_gather import all_gather_matmul
from .group import PATHS, release, ring_path
from .peer import DEFAULT_TRANSFER, TRANSFERS
from .plan import REUSE_RULE, SCHEDULES, RingStep, ScatterStep, ring_plan, scatter_plan
from .reduce_scatter import matmul_reduce_scatter

# torch is imported inside the functions that use it: importing this package (the docs, the
# schedules in .plan) needs no torch.

__all__ = ["all_gather_matmul", "matmul_reduce_scatter", "ring_plan", "scatter_plan",
           "ring_path", "RingStep", "ScatterStep", "REUSE_RULE", "SCHEDULES", "PATHS",
           "release", "TRANSFERS", "DEFAULT_TRANSFER"]
