"""A numpy evaluator of MIL programs: checks converted partitions where Core ML cannot run.

Each op is written from coremltools' MIL op specification (``coremltools.converters.mil.mil.
ops.defs``), not from coremltools' own value inference, so that it is an independent check of
the converter: conv weights are ``[C_out, C_in/groups, kH, kW]``, ``pad`` is
``[top, bottom, left, right]``, ``conv_transpose`` weights are ``[C_in, C_out/groups, kH, kW]``
and its output is the full result cropped by ``pad``, ``linear`` is ``x @ weight.T + bias``.

Only the op types the converter emits, and the few that coremltools' passes rewrite them into
(``batch_norm``, ``silu``, ``sub``, ``real_div``, ``cast``), are implemented; any other op
raises :class:`MilEvalError` naming it and listing the ones that exist. Arithmetic is float32:
in a float16 program, ``cast`` and float16 constants round values to float16 where the program
stores them, but the ops in between do not round as float16 hardware would.

>>> outputs = evaluate(program, {"in_0": x})   # {output name: array}
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

__all__ = ["MilEvalError", "evaluate", "OPS"]


class MilEvalError(RuntimeError):
    """The evaluator met an op or an argument it does not implement."""


def _windows(x: np.ndarray, kh: int, kw: int, sh: int, sw: int, dh: int, dw: int) -> np.ndarray:
    """[N, C, OH, OW, kh, kw] strided view of NCHW ``x`` (already padded)."""
    n, c, h, w = x.shape
    oh = (h - (kh - 1) * dh - 1) // sh + 1
    ow = (w - (kw - 1) * dw - 1) // sw + 1
    s = x.strides
    return np.lib.stride_tricks.as_strided(
        x,
        shape=(n, c, oh, ow, kh, kw),
        strides=(s[0], s[1], s[2] * sh, s[3] * sw, s[2] * dh, s[3] * dw),
        writeable=False,
    )


def _pad_hw(x: np.ndarray, pad: Any, value: float = 0.0) -> np.ndarray:
    top, bottom, left, right = (int(p) for p in np.asarray(pad).reshape(-1))
    return np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=value)


def _conv_pad(
    a: Mapping[str, Any], weight_hw: tuple[int, int], dil: tuple[int, int], spatial: tuple[int, int]
) -> list[int]:
    pad_type = str(a.get("pad_type", "valid"))
    if pad_type == "custom":
        return [int(p) for p in np.asarray(a["pad"]).reshape(-1)]
    if pad_type == "valid":
        return [0, 0, 0, 0]
    if pad_type in ("same", "same_lower"):
        strides = _pair(a.get("strides"), 1)
        pads: list[int] = []
        for size, k, s, d in zip(spatial, weight_hw, strides, dil):
            out = -(-size // s)
            total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
            small, big = total // 2, total - total // 2
            pads += [big, small] if pad_type == "same_lower" else [small, big]
        return pads
    raise MilEvalError(f"pad_type {pad_type!r}")


def _pair(value: Any, default: int) -> tuple[int, int]:
    if value is None:
        return default, default
    v = [int(x) for x in np.asarray(value).reshape(-1)]
    if len(v) != 2:
        raise MilEvalError(f"only 2-D spatial ops are evaluated, found {v}")
    return v[0], v[1]


def _conv(a: Mapping[str, Any]) -> np.ndarray:
    x = np.asarray(a["x"], np.float32)
    w = np.asarray(a["weight"], np.float32)
    if x.ndim != 4:
        raise MilEvalError(f"conv: only 2-D convolution is evaluated, x has rank {x.ndim}")
    groups = int(a.get("groups", 1) or 1)
    sh, sw = _pair(a.get("strides"), 1)
    dh, dw = _pair(a.get("dilations"), 1)
    kh, kw = w.shape[2:]
    xp = _pad_hw(x, _conv_pad(a, (kh, kw), (dh, dw), x.shape[2:]))
    n, c_in = x.shape[:2]
    c_out = w.shape[0]
    cin_g, cout_g = c_in // groups, c_out // groups
    win = _windows(xp, kh, kw, sh, sw, dh, dw)  # N, C_in, OH, OW, kh, kw
    oh, ow = win.shape[2:4]
    out = np.zeros((n, c_out, oh, ow), np.float32)
    if cin_g == 1:  # depthwise: output channel o reads input channel o // cout_g only
        src = np.arange(c_out) // cout_g
        for i in range(kh):
            for j in range(kw):
                out += win[..., i, j][:, src] * w[:, 0, i, j].reshape(1, -1, 1, 1)
    else:
        for g in range(groups):
            wg = w[g * cout_g : (g + 1) * cout_g]  # cout_g, cin_g, kh, kw
            wi = win[:, g * cin_g : (g + 1) * cin_g]
            part = np.tensordot(wi, wg, axes=([1, 4, 5], [1, 2, 3]))  # N, OH, OW, cout_g
            out[:, g * cout_g : (g + 1) * cout_g] = part.transpose(0, 3, 1, 2)
    bias = a.get("bias")
    if bias is not None:
        out += np.asarray(bias, np.float32).reshape(1, -1, 1, 1)
    return out


def _conv_transpose(a: Mapping[str, Any]) -> np.ndarray:
    x = np.asarray(a["x"], np.float32)
    w = np.asarray(a["weight"], np.float32)  # C_in, C_out/groups, kH, kW
    if int(a.get("groups", 1) or 1) != 1:
        raise MilEvalError("conv_transpose: only groups=1 is evaluated")
    sh, sw = _pair(a.get("strides"), 1)
    dh, dw = _pair(a.get("dilations"), 1)
    n, _, h, wd = x.shape
    c_out, kh, kw = w.shape[1:]
    full_h, full_w = (h - 1) * sh + (kh - 1) * dh + 1, (wd - 1) * sw + (kw - 1) * dw + 1
    full = np.zeros((n, c_out, full_h, full_w), np.float32)
    # Every input pixel scatters its weighted kernel into the full result.
    contrib = np.einsum("nchw,coij->nohwij", x, w, optimize=True)
    for i in range(kh):
        for j in range(kw):
            rows = slice(i * dh, i * dh + (h - 1) * sh + 1, sh)
            cols = slice(j * dw, j * dw + (wd - 1) * sw + 1, sw)
            full[:, :, rows, cols] += contrib[..., i, j]
    pad_type = str(a.get("pad_type", "valid"))
    if pad_type == "custom":
        top, bottom, left, right = (int(p) for p in np.asarray(a["pad"]).reshape(-1))
    elif pad_type == "valid":
        top = bottom = left = right = 0
    else:
        raise MilEvalError(f"conv_transpose: pad_type {pad_type!r}")
    out = full[:, :, top : full_h - bottom, left : full_w - right]
    shape = a.get("output_shape")
    if shape is not None:
        oh, ow = (int(v) for v in np.asarray(shape).reshape(-1)[-2:])
        out = out[:, :, :oh, :ow]
    bias = a.get("bias")
    if bias is not None:
        out = out + np.asarray(bias, np.float32).reshape(1, -1, 1, 1)
    return np.ascontiguousarray(out)


def _pool_args(a: Mapping[str, Any]) -> tuple[np.ndarray, int, int, int, int, list[int]]:
    x = np.asarray(a["x"], np.float32)
    if x.ndim != 4:
        raise MilEvalError(f"pool: only 2-D pooling is evaluated, x has rank {x.ndim}")
    if bool(a.get("ceil_mode", False)):
        raise MilEvalError("pool: ceil_mode=True is not evaluated")
    kh, kw = _pair(a["kernel_sizes"], 1)
    sh, sw = _pair(a.get("strides"), 1)
    pad = _conv_pad(a, (kh, kw), (1, 1), x.shape[2:])
    return x, kh, kw, sh, sw, pad


def _max_pool(a: Mapping[str, Any]) -> np.ndarray:
    x, kh, kw, sh, sw, pad = _pool_args(a)
    win = _windows(_pad_hw(x, pad, -np.inf), kh, kw, sh, sw, 1, 1)
    return win.max(axis=(4, 5)).astype(np.float32)


def _avg_pool(a: Mapping[str, Any]) -> np.ndarray:
    x, kh, kw, sh, sw, pad = _pool_args(a)
    total = _windows(_pad_hw(x, pad), kh, kw, sh, sw, 1, 1).sum(axis=(4, 5))
    if bool(a.get("exclude_padding_from_average", False)):
        ones = np.ones((1, 1) + x.shape[2:], np.float32)
        count = _windows(_pad_hw(ones, pad), kh, kw, sh, sw, 1, 1).sum(axis=(4, 5))
    else:
        count = np.float32(kh * kw)
    return (total / count).astype(np.float32)


def _pad(a: Mapping[str, Any]) -> np.ndarray:
    x = np.asarray(a["x"])
    pad = [int(p) for p in np.asarray(a["pad"]).reshape(-1)]
    n = len(pad) // 2
    widths = [(0, 0)] * (x.ndim - n) + [(pad[2 * i], pad[2 * i + 1]) for i in range(n)]
    mode = str(a.get("mode", "constant"))
    if mode == "constant":
        return np.pad(x, widths, constant_values=float(a.get("constant_val", 0.0) or 0.0))
    if mode == "reflect":
        return np.pad(x, widths, mode="reflect")
    if mode == "replicate":
        return np.pad(x, widths, mode="edge")
    raise MilEvalError(f"pad: mode {mode!r}")


def _source_grid(size_in: int, size_out: int, mode: str) -> np.ndarray:
    """Sampling positions of resize_bilinear, as its specification lists them per mode."""
    i = np.arange(size_out, dtype=np.float64)
    if mode in ("STRICT_ALIGN_CORNERS", "ALIGN_CORNERS"):
        if size_out == 1:
            grid = np.full(1, (size_in - 1) / 2 if mode == "ALIGN_CORNERS" else 0.0)
        else:
            grid = i * (size_in - 1) / (size_out - 1)
    elif mode == "DEFAULT":
        spacing = (size_in - size_in / size_out) / (size_out - 1) if size_out > 1 else 0.0
        grid = i * spacing
    elif mode == "OFFSET_CORNERS":
        delta = max(1, size_in - 1) / size_out
        grid = 0.5 * delta + i * delta
    elif mode == "UNALIGN_CORNERS":
        spacing = size_in / size_out
        grid = i * spacing + 0.5 * spacing - 0.5
    else:
        raise MilEvalError(f"resize_bilinear: sampling_mode {mode!r}")
    return np.clip(grid, 0, size_in - 1)


def _interp(x: np.ndarray, axis: int, grid: np.ndarray) -> np.ndarray:
    lo = np.floor(grid).astype(np.int64)
    hi = np.minimum(lo + 1, x.shape[axis] - 1)
    frac = (grid - lo).astype(np.float32)
    shape = [1] * x.ndim
    shape[axis] = -1
    frac = frac.reshape(shape)
    return np.take(x, lo, axis=axis) * (1 - frac) + np.take(x, hi, axis=axis) * frac


def _resize_bilinear(a: Mapping[str, Any]) -> np.ndarray:
    x = np.asarray(a["x"], np.float32)
    mode = str(a.get("sampling_mode", "DEFAULT"))
    h_out = int(a.get("target_size_height", 1))
    w_out = int(a.get("target_size_width", 1))
    y = _interp(x, x.ndim - 2, _source_grid(x.shape[-2], h_out, mode))
    return _interp(y, x.ndim - 1, _source_grid(x.shape[-1], w_out, mode)).astype(np.float32)


def _softmax(a: Mapping[str, Any]) -> np.ndarray:
    x = np.asarray(a["x"], np.float32)
    axis = int(a.get("axis", -1))
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(np.float32)


def _reduce_mean(a: Mapping[str, Any]) -> np.ndarray:
    x = np.asarray(a["x"], np.float32)
    axes = a.get("axes")
    if axes is None:
        axes = tuple(range(x.ndim))
    else:
        axes = tuple(int(v) for v in np.asarray(axes).reshape(-1))
    # np.mean gives a numpy scalar, not an array, when it reduces every axis without keep_dims.
    return np.asarray(
        np.mean(x, axis=axes, keepdims=bool(a.get("keep_dims", False)), dtype=np.float32)
    )


def _linear(a: Mapping[str, Any]) -> np.ndarray:
    y = np.asarray(a["x"], np.float32) @ np.asarray(a["weight"], np.float32).T
    if a.get("bias") is not None:
        y = y + np.asarray(a["bias"], np.float32)
    return y.astype(np.float32)


def _batch_norm(a: Mapping[str, Any]) -> np.ndarray:
    x = np.asarray(a["x"], np.float32)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mean = np.asarray(a["mean"], np.float32).reshape(shape)
    var = np.asarray(a["variance"], np.float32).reshape(shape)
    gamma = np.asarray(a.get("gamma", 1.0) if a.get("gamma") is not None else 1.0, np.float32)
    beta = np.asarray(a.get("beta", 0.0) if a.get("beta") is not None else 0.0, np.float32)
    eps = float(a.get("epsilon", 1e-5) or 1e-5)
    y = (x - mean) / np.sqrt(var + eps)
    return (
        y * np.reshape(gamma, shape if gamma.ndim else ())
        + np.reshape(beta, shape if beta.ndim else ())
    ).astype(np.float32)


def _reshape(a: Mapping[str, Any]) -> np.ndarray:
    x = np.asarray(a["x"])
    return x.reshape([int(d) for d in np.asarray(a["shape"]).reshape(-1)])


def _concat(a: Mapping[str, Any]) -> np.ndarray:
    values = [np.asarray(v) for v in a["values"]]
    axis = int(a["axis"])
    if bool(a.get("interleave", False)):
        raise MilEvalError("concat: interleave=True is not evaluated")
    return np.concatenate(values, axis=axis)


def _f32(fn: Callable[..., Any]) -> Callable[[Mapping[str, Any]], np.ndarray]:
    return lambda a: np.asarray(fn(a), np.float32)


_CAST_TYPES = {"fp16": np.float16, "fp32": np.float32, "int32": np.int32, "bool": np.bool_}


def _cast(a: Mapping[str, Any]) -> np.ndarray:
    dtype = str(a["dtype"])
    if dtype not in _CAST_TYPES:
        raise MilEvalError(f"cast: dtype {dtype!r}")
    return np.asarray(a["x"]).astype(_CAST_TYPES[dtype])


OPS: dict[str, Callable[[Mapping[str, Any]], np.ndarray]] = {
    "identity": lambda a: np.asarray(a["x"]),
    "cast": _cast,
    "transpose": lambda a: np.transpose(np.asarray(a["x"]), [int(p) for p in a["perm"]]),
    "reshape": _reshape,
    "conv": _conv,
    "conv_transpose": _conv_transpose,
    "max_pool": _max_pool,
    "avg_pool": _avg_pool,
    "pad": _pad,
    "concat": _concat,
    "add": _f32(lambda a: np.add(a["x"], a["y"])),
    "sub": _f32(lambda a: np.subtract(a["x"], a["y"])),
    "mul": _f32(lambda a: np.multiply(a["x"], a["y"])),
    "real_div": _f32(lambda a: np.divide(a["x"], a["y"])),
    "relu": _f32(lambda a: np.maximum(a["x"], 0)),
    "relu6": _f32(lambda a: np.clip(a["x"], 0, 6)),
    "clip": _f32(lambda a: np.clip(a["x"], a["alpha"], a["beta"])),
    "sigmoid": _f32(lambda a: 1 / (1 + np.exp(-np.asarray(a["x"], np.float64)))),
    "sigmoid_hard": _f32(lambda a: np.clip(a["alpha"] * np.asarray(a["x"]) + a["beta"], 0, 1)),
    "silu": _f32(lambda a: a["x"] / (1 + np.exp(-np.asarray(a["x"], np.float64)))),
    "tanh": _f32(lambda a: np.tanh(a["x"])),
    "softmax": _softmax,
    "reduce_mean": _reduce_mean,
    "linear": _linear,
    "batch_norm": _batch_norm,
    "resize_bilinear": _resize_bilinear,
}


def _value(var: Any, env: Mapping[str, Any]) -> Any:
    if isinstance(var, (list, tuple)):
        return [_value(v, env) for v in var]
    if var.name in env:
        return env[var.name]
    if var.val is not None:
        return var.val
    raise MilEvalError(f"variable {var.name!r} has no value yet (ops out of order?)")


def evaluate(
    program: Any, inputs: Mapping[str, np.ndarray], function: str = "main"
) -> dict[str, np.ndarray]:
    """Run ``program``'s ``function`` on ``inputs`` (name -> array); return outputs by name."""
    func = program.functions[function]
    env: dict[str, Any] = {}
    for name, var in func.inputs.items():
        if name not in inputs:
            raise MilEvalError(f"missing input {name!r}; the program takes {sorted(func.inputs)}")
        value = np.asarray(inputs[name], np.float32)
        if tuple(value.shape) != tuple(var.shape):
            raise MilEvalError(f"input {name!r}: expected shape {var.shape}, found {value.shape}")
        env[name] = value
    for op in func.operations:
        if op.op_type == "const":
            env[op.outputs[0].name] = op.outputs[0].val
            continue
        impl = OPS.get(op.op_type)
        if impl is None:
            raise MilEvalError(
                f"op {op.op_type!r} ({op.name}) is not implemented; evaluated ops: {sorted(OPS)}"
            )
        args = {k: _value(v, env) for k, v in op.inputs.items()}
        try:
            result = impl(args)
        except MilEvalError:
            raise
        except Exception as exc:
            shapes = {k: np.shape(v) for k, v in args.items()}
            raise MilEvalError(f"{op.op_type} ({op.name}) failed: {exc} (inputs {shapes})") from exc
        out = op.outputs[0]
        if out.shape is not None and tuple(np.shape(result)) != tuple(out.shape):
            raise MilEvalError(
                f"{op.op_type} ({op.name}): evaluated shape {np.shape(result)}, "
                f"the program declares {out.shape}"
            )
        env[out.name] = result
    return {var.name: np.asarray(env[var.name]) for var in func.outputs}
