"""The float arithmetic of Eigen expressions in LiteRT's optimized kernels, as its x86 wheel
runs them: SSE packets of 4 floats, no fused multiply-add (a ``pmadd`` is a float32 multiply,
then a float32 add), elements past the last whole packet through the scalar functions.

Written from Eigen's algorithms (GenericPacketMathFunctions, the float logistic functor,
redux) and checked bit for bit against LiteRT's SOFTMAX and LOGISTIC on single-op models;
``numpy.exp`` would differ from Eigen's polynomial in the last bit of about half the values.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from offload.ops._libm import expf

__all__ = ["PACKET", "pexp", "logistic", "tanh", "erfc", "column_sums", "row_exp_sums"]

# Floats per SSE packet.
PACKET = 4

_F = np.float32


def _scale_by_pow2(y: np.ndarray, m: np.ndarray) -> np.ndarray:
    """pldexp: y * 2**m in four power-of-two factors, so no intermediate over- or
    underflows before the result itself does."""
    e = np.clip(m, -278, 278).astype(np.int32)
    b = e >> 2
    c = _pow2(b)
    out = y * c * c * c
    return out * _pow2(e - 3 * b)


def _pow2(exponent: np.ndarray) -> np.ndarray:
    """2.0**exponent in float32 for int32 exponents in the normal range [-126, 127], built
    from the bits: ``np.ldexp`` gives the same values several times slower."""
    return ((exponent + np.int32(127)) << np.int32(23)).view(_F)


def _packet_exp(x: np.ndarray) -> np.ndarray:
    """Eigen's pexp_float: exp(x) = 2**m * exp(r) with a degree 6 polynomial for exp(r)."""
    zero = x < _F(-104)
    xc = np.minimum(x, _F(88.723))
    m = np.floor(xc * _F(1.44269504088896341) + _F(0.5))
    r = m * _F(-0.693359375) + xc
    r = m * _F(2.12194440e-4) + r
    r2 = r * r
    even = r2 * _F(1.37449637986719608306884765625e-3) + _F(4.166965186595916748046875e-2)
    odd = r2 * _F(8.36894474923610687255859375e-3) + _F(0.16666518151760101318359375)
    even = r2 * even + _F(0.49999988079071044921875)
    y = r * odd + even
    y = r2 * y + (r + _F(1))
    y = np.maximum(_scale_by_pow2(y, m), x)
    return np.where(zero, _F(0), y)


def _scalar_exp(x: np.ndarray) -> np.ndarray:
    """std::exp on float32: the C library's expf."""
    return expf(x)


def pexp(x: np.ndarray) -> np.ndarray:
    """``array.exp()`` over a contiguous float32 buffer: whole packets through pexp_float, the
    last size % 4 elements through std::exp. The buffer is assumed aligned, as LiteRT's tensor
    arena is, so no element before the first packet goes the scalar way."""
    flat = np.asarray(x, _F).reshape(-1)
    lanes = flat.size // PACKET * PACKET
    out = np.empty_like(flat)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        out[:lanes] = _packet_exp(flat[:lanes])
        out[lanes:] = _scalar_exp(flat[lanes:])
    return out.reshape(np.shape(x))


def _packet_logistic(x: np.ndarray) -> np.ndarray:
    """Eigen's float logistic functor: exp(x/2) by a degree 5 polynomial and a fast ldexp,
    squared, then e / (1 + e)."""
    zero = x < _F(-104)
    xc = np.minimum(x, _F(16.6355324)) * _F(0.5)
    m = np.floor(xc * _F(1.44269504088896341) + _F(0.5))
    r = m * _F(-0.693359375) + xc
    r = m * _F(2.12194440e-4) + r
    r2 = r * r
    even = r2 * _F(4.1898667812347412109375e-2) + _F(0.49999141693115234375)
    odd = r2 * _F(8.33471305668354034423828125e-3) + _F(0.16666877269744873046875)
    p = r * odd + even
    p = r2 * p + (r + _F(1))
    biased = np.clip(m + _F(127), 0, 255).astype(np.uint32)
    e = p * (biased << 23).view(_F)
    e = e * e
    return np.where(zero, _F(0), e / (_F(1) + e))


def logistic(x: np.ndarray) -> np.ndarray:
    """``array.unaryExpr(scalar_logistic_op<float>())`` over a contiguous float32 buffer: whole
    packets through the packet logistic, the tail as exp(min(x, 16.6355324)) / (1 + exp)."""
    flat = np.asarray(x, _F).reshape(-1)
    lanes = flat.size // PACKET * PACKET
    out = np.empty_like(flat)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        out[:lanes] = _packet_logistic(flat[:lanes])
        e = _scalar_exp(np.minimum(flat[lanes:], _F(16.6355324)))
        out[lanes:] = e / (_F(1) + e)
    return out.reshape(np.shape(x))


# ptanh_float (Eigen's fast-math tanh): an odd [9/8] rational function of x, with x clamped
# where the approximation reaches exactly 1 (without FMA, as LiteRT's x86 wheel is built).
_TANH_CLAMP = _F(7.90738964080810547)
_TANH_NUMERATOR = tuple(map(_F, (1.394553628e-8, 2.102733560e-5, 3.520756727e-3, 1.340216100e-1)))
_TANH_DENOMINATOR = tuple(
    map(_F, (8.015776984e-7, 3.326951409e-4, 2.597254514e-2, 4.673548340e-1, 1.0))
)


def _horner(x2: np.ndarray, coefficients: tuple[np.float32, ...]) -> np.ndarray:
    """ppolevl: the highest coefficient first, each step a multiply then an add."""
    total = np.full_like(x2, coefficients[0])
    for c in coefficients[1:]:
        total = total * x2 + c
    return total


def tanh(x: np.ndarray) -> np.ndarray:
    """``array.tanh()`` on float32, LiteRT's optimized TANH: ptanh_float on every element (the
    scalar tail runs the same expression, so packets need no split): x^3 p(x^2) + x over
    q(x^2). NaN stays NaN (the clamp's min and max pass it through, as SSE's do here)."""
    x = np.asarray(x, _F)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        xc = np.clip(x, -_TANH_CLAMP, _TANH_CLAMP)
        x2 = xc * xc
        p = xc * x2 * _horner(x2, _TANH_NUMERATOR) + xc
        return p / _horner(x2, _TANH_DENOMINATOR)


# generic_fast_erfc<float>: 1 + x S(x^2) for |x| <= 1; beyond, exp(-x^2) (its low part
# corrected) times P(1/x^2) / (x Q(1/x^2)), plus 2 for negative x; x clamped to [-11, 11].
_ERFC_SMALL = tuple(
    map(
        _F,
        (
            5.61802298761904239654541015625e-04,
            -4.91381669417023658752441406250e-03,
            2.67075151205062866210937500000e-02,
            -1.12800106406211853027343750000e-01,
            3.76122951507568359375000000000e-01,
            -1.12837910652160644531250000000e00,
        ),
    )
)
_ERFC_NUMERATOR = tuple(
    map(
        _F,
        (
            1.0208116471767425537109375e-01,
            4.2920666933059692382812500e-01,
            3.2379078865051269531250000e-01,
            5.3971976041793823242187500e-02,
        ),
    )
)
_ERFC_DENOMINATOR = tuple(
    map(
        _F,
        (
            1.7251677811145782470703125e-02,
            3.9137163758277893066406250e-01,
            1.0,
            6.2173241376876831054687500e-01,
            9.5662862062454223632812500e-02,
        ),
    )
)


def _erfc_with(x: np.ndarray, exp: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    x = np.clip(x, _F(-11), _F(11))
    x2 = x * x
    small = x * _horner(x2, _ERFC_SMALL) + _F(1)
    # twoprod_low: the exact rounding error of x * x (a float32 product is exact in float64)
    low = (x.astype(np.float64) * x - x2).astype(_F)
    e = exp(-x2)
    z = e - e * low
    ratio = _horner(_F(1) / x2, _ERFC_NUMERATOR) / (x * _horner(_F(1) / x2, _ERFC_DENOMINATOR))
    large = z * ratio + np.where(x < 0, _F(2), _F(0))
    return np.where(x2 > _F(1), large, small)


def erfc(x: np.ndarray) -> np.ndarray:
    """``array.erfc()`` on float32 (Eigen's generic_fast_erfc, no FMA): whole packets with the
    packet exp, the last size % 4 elements with std::exp."""
    flat = np.asarray(x, _F).reshape(-1)
    lanes = flat.size // PACKET * PACKET
    out = np.empty_like(flat)
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        out[:lanes] = _erfc_with(flat[:lanes], _packet_exp)
        out[lanes:] = _erfc_with(flat[lanes:], expf)
    return out.reshape(np.shape(x))


def _sequential_sum(columns: np.ndarray) -> np.ndarray:
    """Left-to-right float32 sum over the last axis."""
    total = columns[..., 0].copy()
    for k in range(1, columns.shape[-1]):
        total += columns[..., k]
    return total


def _packet_sum(rows: np.ndarray) -> np.ndarray:
    """Eigen's vectorized redux over whole packets of rows that start on a packet boundary:
    two packet accumulators over pairs of packets, then a lone last packet, then a
    horizontal add of the packet as (a0 + a2) + (a1 + a3)."""
    count, n = rows.shape
    pairs = n // (2 * PACKET) * (2 * PACKET)
    whole = n // PACKET * PACKET
    if pairs:
        # accumulate adds the pairs of packets one after another, as the two accumulators
        # do, in one call rather than one per pair.
        pair_packets = rows[:, :pairs].reshape(count, pairs // (2 * PACKET), 2, PACKET)
        both = np.add.accumulate(pair_packets, axis=1)[:, -1]
        acc = both[:, 0] + both[:, 1]
        if whole > pairs:
            acc += rows[:, pairs : pairs + PACKET]
    else:
        acc = rows[:, :PACKET].copy()
    return (acc[:, 0] + acc[:, 2]) + (acc[:, 1] + acc[:, 3])


def column_sums(rows: np.ndarray) -> np.ndarray:
    """``colwise().sum()`` of Eigen's column-major view of a row-major (rows, n) float32 buffer,
    that is one sum per row. Each sum is a redux that starts its packets at the first 16-byte
    aligned element (row i begins i * n elements after an aligned base), adds the packets as
    :func:`_packet_sum` does, then the elements before the first packet, then those after the
    last; a row with fewer than a packet past its aligned start is summed in order."""
    rows = np.asarray(rows, _F)
    count, n = rows.shape
    sums = np.empty(count, _F)
    starts = (-(np.arange(count) * n)) % PACKET
    for head in sorted(set(starts.tolist())):  # np.unique costs more than the sums here
        index = np.nonzero(starts == head)[0]
        group = rows[index]
        head = min(int(head), n)
        if n - head < PACKET:
            sums[index] = _sequential_sum(group)
            continue
        end = head + (n - head) // PACKET * PACKET
        total = _packet_sum(group[:, head:end])
        for k in [*range(head), *range(end, n)]:
            total += group[:, k]
        sums[index] = total
    return sums


def row_exp_sums(rows: np.ndarray) -> np.ndarray:
    """``(expression).exp().sum()`` of each row of a (rows, n) float32 array, where the
    expression (``x - max`` in LiteRT's LOG_SOFTMAX) has no data pointer, so Eigen knows no
    alignment: whole packets from each row's first element, exp and sums alike (pexp_float,
    :func:`_packet_sum`), then the last n % 4 elements through std::exp, added in order; rows
    shorter than a packet are scalar throughout."""
    rows = np.asarray(rows, _F)
    n = rows.shape[1]
    whole = n // PACKET * PACKET
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        if not whole:
            return _sequential_sum(expf(rows))
        total = _packet_sum(_packet_exp(rows[:, :whole]))
        for k in range(whole, n):
            total += expf(rows[:, k])
    return total
