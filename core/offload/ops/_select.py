"""SELECT and SELECT_V2: x where the condition holds, else y; one kernel in LiteRT
(select.cc), whose versions differ in how the condition meets x and y."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._types import accepts, one_of

__all__ = ["SelectOp"]


class SelectOp(OpKernel):
    """Picks x where the bool condition (input 0) holds, else y (inputs 1 and 2), with the
    condition as :meth:`condition` shapes it for ``np.where``."""

    types = accepts(
        "FLOAT32 FLOAT16 INT8 UINT8 INT16 INT32 INT64 BOOL FLOAT64 COMPLEX64 UINT16 UINT32",
        data=(1, 2),
        others={0: one_of("BOOL")},
    )

    def condition(self, cond: np.ndarray, rank: int) -> np.ndarray:
        """The condition as numpy broadcasts it against values of ``rank`` axes."""
        return cond

    def _run(self, cond: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        picked = np.where(self.condition(np.asarray(cond, np.bool_), np.ndim(x)), x, y)
        return picked.astype(self.outputs[0].dtype, copy=False)
