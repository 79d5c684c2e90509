"""Float SOFTMAX and LOGISTIC bit for bit against LiteRT's builtin kernels, whose Eigen packet
arithmetic (exp polynomial, packet-wise sums) numpy's exp and sum do not reproduce: the last
ops of the MobileNet and InceptionV3 classifiers and of small_cnn (issue 13)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert.interpreter")

from _one_op import Operand, describe_mismatch, run_both  # noqa: E402

from offload.ops._eigen import column_sums  # noqa: E402

pytestmark = pytest.mark.litert


def _assert_same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape)
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), describe_mismatch(got, want)


@pytest.mark.parametrize(
    "shape, beta",
    [
        ((1, 1000), 1.0),  # the classifiers' output
        ((1, 1001), 0.7),  # a tail past the last packet, a beta that rounds
        ((3, 10), 1.0),  # rows that start off the 16-byte boundary
        ((1, 2034, 2), 1.0),  # a detector's per-anchor softmax: rows shorter than a packet
    ],
)
def test_float_softmax_is_eigens(shape, beta) -> None:
    """Float SOFTMAX: Eigen's packet exp, row sums packet-wise from each row's first aligned
    element, then each value times 1 / sum."""
    x = (np.random.default_rng(21).standard_normal(shape) * 3).astype(np.float32)
    got, want = run_both("SOFTMAX", [Operand(x)], shape, np.float32, {"beta": beta})
    _assert_same(got, want)


@pytest.mark.parametrize("shape", [(1, 64, 64, 3), (1, 1003)])
def test_float_logistic_is_eigens(shape) -> None:
    """Float LOGISTIC: Eigen's float logistic (exp(x/2) squared, e / (1 + e)) in packets of 4,
    the tail through std::exp; saturating inputs included."""
    x = (np.random.default_rng(22).standard_normal(shape) * 4).astype(np.float32)
    x.flat[:5] = [-200.0, 200.0, -90.0, 50.0, 0.0]
    got, want = run_both("LOGISTIC", [Operand(x)], shape, np.float32)
    _assert_same(got, want)


def test_column_sums_start_packets_at_the_aligned_element() -> None:
    """The same ten floats sum differently in row 0 (aligned: packets from element 0) and in
    row 1 (8 bytes past the boundary: packets from element 2, elements 0 and 1 added after)."""
    tiny = np.float32(2.0**-24)  # half an ulp of 1.0: lost when added to 1.0 alone
    row = np.array([1, tiny, 0, 0, 0, tiny, 0, 0, 0, 0], np.float32)
    sums = column_sums(np.stack([row, row]))
    assert sums[0] == np.float32(1) + 2 * tiny  # the two tinies meet in one lane first
    assert sums[1] == np.float32(1)  # one tiny in the packets, then 1.0, then the other
