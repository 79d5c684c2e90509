"""Read .tflite flatbuffers (through the ``tflite`` schema package) into an immutable Model.

Constant buffers stay views into the file bytes: ``model_path`` is memory-mapped read-only,
so loading a large model costs address space, not a copy.
"""

from __future__ import annotations

import errno
import math
import mmap
import os
import stat
import struct
from typing import Any

import numpy as np
import tflite
from tflite.utils import BUILTIN_OPCODE2NAME

from offload._graph import (
    EMPTY_OPTIONS,
    DimensionMetadata,
    Model,
    Node,
    OpOptions,
    Quantization,
    SignatureDef,
    Sparsity,
    Subgraph,
    Tensor,
)
from offload._litert_compat import litert_message
from offload._model_type import classify_model_type
from offload._schema import (
    OPTION2_TYPE_NAMES,
    OPTION_TYPE_NAMES,
    option_fields,
    options_type_for,
)
from offload.errors import ModelLoadError, UnsupportedModelError

__all__ = ["load_model", "TENSOR_TYPES"]

# TensorType enum value -> (name, numpy dtype); object dtype marks types numpy has no match for.
TENSOR_TYPES: dict[int, tuple[str, np.dtype]] = {
    0: ("FLOAT32", np.dtype(np.float32)),
    1: ("FLOAT16", np.dtype(np.float16)),
    2: ("INT32", np.dtype(np.int32)),
    3: ("UINT8", np.dtype(np.uint8)),
    4: ("INT64", np.dtype(np.int64)),
    5: ("STRING", np.dtype(object)),
    6: ("BOOL", np.dtype(np.bool_)),
    7: ("INT16", np.dtype(np.int16)),
    8: ("COMPLEX64", np.dtype(np.complex64)),
    9: ("INT8", np.dtype(np.int8)),
    10: ("FLOAT64", np.dtype(np.float64)),
    11: ("COMPLEX128", np.dtype(np.complex128)),
    12: ("UINT64", np.dtype(np.uint64)),
    13: ("RESOURCE", np.dtype(object)),
    14: ("VARIANT", np.dtype(object)),
    15: ("UINT32", np.dtype(np.uint32)),
    16: ("UINT16", np.dtype(np.uint16)),
    17: ("INT4", np.dtype(np.int8)),
    18: ("BFLOAT16", np.dtype(np.uint16)),
}

_FILE_IDENTIFIER = b"TFL3"
_TWO_GIB = 2**31
# The most bytes one numpy array can span (its sizes are signed intp). LiteRT refuses a tensor
# whose byte count overflows size_t at load ("BytesRequired ... overflowed"); this bound is
# half that, the point past which offload could not hold the tensor at all.
_MAX_TENSOR_BYTES = int(np.iinfo(np.intp).max)

# Zero points a quantized integer tensor's type can hold, by TensorType name. LiteRT keeps zero
# points as int32, so the wide types are bounded by int32 as well. Other types (floats above
# all) carry quantization parameters that no kernel reads, so only their layout is checked.
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_ZERO_POINT_RANGES: dict[str, tuple[int, int]] = {
    "INT4": (-8, 7),
    "INT8": (-128, 127),
    "UINT8": (0, 255),
    "INT16": (-(2**15), 2**15 - 1),
    "UINT16": (0, 2**16 - 1),
    "INT32": (_INT32_MIN, _INT32_MAX),
    "UINT32": (0, _INT32_MAX),
    "INT64": (_INT32_MIN, _INT32_MAX),
    "UINT64": (0, _INT32_MAX),
}


def _parse_options(op: Any, name: str) -> tuple[OpOptions, str]:
    """The operator's builtin options, every field by its snake_case name, enums by name, and
    what was ignored ("" when nothing was).

    They come from whichever of the schema's two unions the operator sets (``BuiltinOptions2``
    holds the StableHLO ops' tables); LiteRT reads one or the other by op, never both. A table
    of another op's type is ignored, as LiteRT ignores it (it asks the union for the op's own
    type and gets nothing): the op runs with its own table's defaults, and the returned text
    says what was dropped, for the model's load report.
    """
    options = _read_options(op)
    if options.type_name == "NoOptions" or name in ("CUSTOM", "DELEGATE"):
        return options, ""
    expected = options_type_for(name)
    if options.type_name == expected:
        return options, ""
    if expected is None:
        ignored = f"a {options.type_name} table, but {name} takes no options"
        return EMPTY_OPTIONS, ignored
    defaults = {f.name: f.default for f in option_fields(expected) if f.kind != "table"}
    return OpOptions(
        expected, defaults
    ), f"a {options.type_name} table where {name} reads {expected}"


def _read_options(op: Any) -> OpOptions:
    if op.BuiltinOptionsType() != 0:
        type_id, table = op.BuiltinOptionsType(), op.BuiltinOptions()
        type_name, unknown = OPTION_TYPE_NAMES.get(type_id), f"UnknownOptions{type_id}"
    elif op.BuiltinOptions2Type() != 0:
        type_id, table = op.BuiltinOptions2Type(), op.BuiltinOptions2()
        type_name, unknown = OPTION2_TYPE_NAMES.get(type_id), f"UnknownOptions2_{type_id}"
    else:
        return EMPTY_OPTIONS
    if type_name is None or table is None:
        return OpOptions(unknown, {})
    cls = getattr(tflite, type_name, None)
    if cls is None:
        return OpOptions(type_name, {})
    options = cls()
    options.Init(table.Bytes, table.Pos)
    return OpOptions(
        type_name,
        {f.name: f.read(options) for f in option_fields(type_name) if f.kind != "table"},
    )


def _file_kind(mode: int) -> str:
    """What a non-regular file is, in the words of ``ls -l``'s first column."""
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    )
    return next((name for test, name in kinds if test(mode)), f"a file of mode {mode:#o}")


def _read_bytes(model_path: str | os.PathLike[str] | None, model_content: Any) -> tuple[Any, str]:
    if (model_path is None) == (model_content is None):
        case = "no_model" if model_path is None else "both_models"
        raise ModelLoadError(
            litert_message(
                case,
                "expected exactly one of model_path or model_content, "
                f"found model_path={model_path!r} and model_content of type "
                f"{type(model_content).__name__}",
            )
        )
    if model_content is not None:
        if not isinstance(model_content, (bytes, bytearray, memoryview)):
            raise ModelLoadError(
                f"model_content must be bytes, found {type(model_content).__name__}"
            )
        return bytes(model_content), "<model_content>"
    if not isinstance(model_path, (str, os.PathLike)):
        hint = "; pass a model's bytes as model_content" if isinstance(model_path, bytes) else ""
        raise ModelLoadError(
            f"model_path must be a str or os.PathLike, found {type(model_path).__name__}{hint}"
        )
    path = os.fspath(model_path)
    if not isinstance(path, str) or "\0" in path:
        raise ModelLoadError(f"model_path must be a text path without NUL bytes, found {path!r}")
    return _map_regular_file(path), path


def _map_regular_file(path: str) -> mmap.mmap:
    """Memory-map ``path`` read-only, refusing anything that is not a regular file.

    O_NONBLOCK keeps open() from waiting for a writer on a FIFO (or a device from blocking);
    the type is then taken from fstat of the opened descriptor, so a path swapped between a
    check and the open cannot slip through. For a regular file O_NONBLOCK changes nothing.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise ModelLoadError(litert_message("open_failed", "no such file", path=path)) from None
    except OSError as exc:
        # A Unix socket cannot be opened at all (ENXIO); name it from stat instead.
        found = f"an unreadable path ({exc.strerror})"
        if exc.errno == errno.ENXIO:
            try:
                found = _file_kind(os.stat(path).st_mode)
            except OSError:
                pass
        raise ModelLoadError(
            litert_message("open_failed", f"expected a .tflite file, found {found}", path=path)
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            found = _file_kind(info.st_mode)
            raise ModelLoadError(
                litert_message(
                    "open_failed",
                    f"expected a .tflite file (a regular file), found {found}",
                    path=path,
                )
            )
        if info.st_size == 0:
            raise ModelLoadError(f"{path}: expected a .tflite flatbuffer, found an empty file")
        try:
            return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        except OSError as exc:  # e.g. a filesystem that cannot map files
            raise ModelLoadError(f"{path}: the file could not be memory-mapped ({exc})") from exc
    finally:
        os.close(fd)  # the mapping keeps its own reference to the file


def load_model(
    model_path: str | os.PathLike[str] | None = None, model_content: bytes | None = None
) -> Model:
    """Load a .tflite model from a path (memory-mapped) or from bytes.

    Raises :class:`offload.errors.ModelLoadError` for anything that is not a readable model.
    """
    data, source = _read_bytes(model_path, model_content)
    if len(data) == 0 and model_path is None:
        # LiteRT takes empty bytes for no model at all.
        raise ModelLoadError(litert_message("no_model", "model_content is empty"))
    if len(data) < 8:
        raise ModelLoadError(
            litert_message(
                "not_flatbuffer",
                f"{source}: expected a .tflite flatbuffer (at least 8 bytes), "
                f"found {len(data)} bytes",
            )
        )
    if data[4:8] != _FILE_IDENTIFIER:
        raise ModelLoadError(
            litert_message(
                "not_flatbuffer",
                f"{source}: expected the TFLite file identifier {_FILE_IDENTIFIER!r} at bytes "
                f"4-8, found {bytes(data[4:8])!r}; this is not a .tflite model",
            )
        )
    root = struct.unpack_from("<I", data, 0)[0]
    if root >= len(data):
        raise ModelLoadError(
            litert_message(
                "not_flatbuffer",
                f"{source}: root table offset {root} points past the end of the "
                f"{len(data)}-byte file (truncated or corrupted)",
            )
        )
    try:
        return _build_model(data, source)
    except (ModelLoadError, UnsupportedModelError):
        raise
    except Exception as exc:  # flatbuffers raises bare struct/index/value errors on bad bytes
        raise ModelLoadError(
            f"{source}: the flatbuffer could not be read ({type(exc).__name__}: {exc}); "
            "the file is truncated or corrupted"
        ) from exc


def _build_model(data: Any, source: str) -> Model:
    fb = tflite.Model.GetRootAs(data, 0)
    buffers = _read_buffers(fb, data, source)
    opcodes = [_read_opcode(fb.OperatorCodes(i)) for i in range(fb.OperatorCodesLength())]
    subgraphs = tuple(
        _read_subgraph(fb.Subgraphs(i), i, buffers, opcodes, source)
        for i in range(fb.SubgraphsLength())
    )
    if not subgraphs:
        raise ModelLoadError(f"{source}: expected at least one subgraph, found none")
    metadata: dict[str, bytes] = {}
    for i in range(fb.MetadataLength()):
        entry = fb.Metadata(i)
        name = (entry.Name() or b"").decode("utf-8", "replace")
        buf_index = entry.Buffer()
        raw = buffers[buf_index] if 0 <= buf_index < len(buffers) else None
        metadata[name] = bytes(raw) if raw is not None else b""
    signatures = []
    for i in range(fb.SignatureDefsLength()):
        sig = fb.SignatureDefs(i)
        signatures.append(
            SignatureDef(
                key=(sig.SignatureKey() or b"").decode(),
                subgraph_index=sig.SubgraphIndex(),
                inputs={
                    (sig.Inputs(j).Name() or b"").decode(): sig.Inputs(j).TensorIndex()
                    for j in range(sig.InputsLength())
                },
                outputs={
                    (sig.Outputs(j).Name() or b"").decode(): sig.Outputs(j).TensorIndex()
                    for j in range(sig.OutputsLength())
                },
            )
        )
    model_type, reason = classify_model_type(subgraphs, metadata)
    return Model(
        version=fb.Version(),
        description=(fb.Description() or b"").decode("utf-8", "replace"),
        subgraphs=subgraphs,
        signatures=tuple(signatures),
        metadata=metadata,
        model_type=model_type,
        model_type_reason=reason,
        source=source,
        content=data,
    )


def _read_buffers(fb: Any, data: Any, source: str) -> list[np.ndarray | None]:
    whole = np.frombuffer(data, dtype=np.uint8)
    buffers: list[np.ndarray | None] = []
    for i in range(fb.BuffersLength()):
        buf = fb.Buffers(i)
        offset, size = buf.Offset(), buf.Size()
        if offset > 1:
            # Models over 2 GiB keep buffers after the flatbuffer, addressed from the file start.
            if offset + size > len(data):
                raise UnsupportedModelError(
                    f"{source}: buffer {i} lives outside the flatbuffer at bytes "
                    f"{offset}..{offset + size}, but the file has {len(data)} bytes; models with "
                    "external buffers must be loaded from the complete file"
                )
            buffers.append(whole[offset : offset + size])
        elif buf.DataLength() > 0:
            buffers.append(buf.DataAsNumpy())
        else:
            buffers.append(None)
    if len(data) > _TWO_GIB and not any(b is not None for b in buffers):
        raise UnsupportedModelError(
            f"{source}: models over 2 GiB without buffers are not supported"
        )
    return buffers


def _read_opcode(code: Any) -> tuple[int, int, str | None]:
    builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
    custom = code.CustomCode()
    return builtin, max(code.Version(), 1), custom.decode("utf-8", "replace") if custom else None


def _read_quantization(
    q: Any, shape: tuple[int, ...], type_name: str, is_constant: bool, where: str
) -> Quantization | None:
    """The tensor's affine quantization; ModelLoadError for parameters that cannot be right.

    Layout (every tensor, floats included, since LiteRT refuses these at load): one zero point
    per scale, ``quantized_dimension`` an axis of the shape, and per-channel scales numbering
    that axis's size. offload also takes a single zero point for many scales (it broadcasts),
    where LiteRT demands equal counts.

    Values (integer tensors only; LiteRT runs floats whatever they carry): scales finite and
    not negative, zero points within the type. A zero scale is allowed on constants only: their
    values then dequantize to 0, LiteRT turns the scale into a zero multiplier, and converters
    write it for weight channels that are all zero. On a runtime tensor (an activation) a zero
    scale is a division by zero in the kernels that rescale into it.
    """
    if q is None or q.ScaleLength() == 0:
        return None
    scale = q.ScaleAsNumpy().astype(np.float32)
    zero_point = (
        q.ZeroPointAsNumpy().astype(np.int64) if q.ZeroPointLength() else np.zeros(0, np.int64)
    )
    axis = int(q.QuantizedDimension())
    count, zp_count = scale.size, zero_point.size
    if zp_count not in (1, count):
        raise ModelLoadError(
            f"{where} has {count} quantization scale(s) and {zp_count} zero point(s); expected "
            f"{'one zero point' if count == 1 else f'1 or {count} zero points'}"
        )
    if shape and not 0 <= axis < len(shape):
        raise ModelLoadError(
            f"{where} of shape {list(shape)} has quantized_dimension {axis}; expected an axis "
            f"in 0..{len(shape) - 1}"
        )
    if count > 1 and (not shape or shape[axis] != count):
        size = f"dimension {axis} of size {shape[axis]}" if shape else "no dimensions (a scalar)"
        raise ModelLoadError(
            f"{where} of shape {list(shape)} has {count} quantization scales along "
            f"quantized_dimension {axis}, which has {size}; expected 1 (per tensor) or one "
            "per channel of that dimension"
        )
    if zp_count == 1 and count > 1:
        zero_point = np.full(scale.shape, zero_point[0], np.int64)
    if type_name in _ZERO_POINT_RANGES:
        _check_quantized_values(scale, zero_point, type_name, is_constant, where)
    scale.flags.writeable = False
    zero_point.flags.writeable = False
    return Quantization(scale, zero_point, axis)


def _check_quantized_values(
    scale: np.ndarray, zero_point: np.ndarray, type_name: str, is_constant: bool, where: str
) -> None:
    bad = ~np.isfinite(scale) | (scale < 0) | ((scale == 0) & (not is_constant))
    if bad.any():
        i = int(np.argmax(bad))
        allowed = (
            "finite and >= 0 (0 is allowed on a constant: its values dequantize to 0)"
            if is_constant
            else "finite and > 0 (kernels divide by a runtime tensor's scale)"
        )
        raise ModelLoadError(
            f"{where} ({type_name}) has quantization scale[{i}] = {scale[i]}; expected {allowed}"
        )
    low, high = _ZERO_POINT_RANGES[type_name]
    outside = (zero_point < low) | (zero_point > high)
    if outside.any():
        i = int(np.argmax(outside))
        raise ModelLoadError(
            f"{where} ({type_name}) has zero_point[{i}] = {int(zero_point[i])}; expected a "
            f"value in {low}..{high}"
        )


_INDEX_VECTORS = {1: tflite.Int32Vector, 2: tflite.Uint16Vector, 3: tflite.Uint8Vector}


def _index_vector(type_id: int, table: Any) -> np.ndarray | None:
    cls = _INDEX_VECTORS.get(type_id)
    if cls is None or table is None:
        return None
    vec = cls()
    vec.Init(table.Bytes, table.Pos)
    return vec.ValuesAsNumpy().astype(np.int64) if vec.ValuesLength() else np.zeros(0, np.int64)


def _read_sparsity(s: Any) -> Sparsity | None:
    if s is None:
        return None
    dims = []
    for j in range(s.DimMetadataLength()):
        d = s.DimMetadata(j)
        dims.append(
            DimensionMetadata(
                format="SPARSE_CSR" if d.Format() == 1 else "DENSE",
                dense_size=d.DenseSize(),
                array_segments=_index_vector(d.ArraySegmentsType(), d.ArraySegments()),
                array_indices=_index_vector(d.ArrayIndicesType(), d.ArrayIndices()),
            )
        )
    return Sparsity(
        traversal_order=tuple(s.TraversalOrderAsNumpy().tolist())
        if s.TraversalOrderLength()
        else (),
        block_map=tuple(s.BlockMapAsNumpy().tolist()) if s.BlockMapLength() else (),
        dim_metadata=tuple(dims),
    )


def _read_tensor(t: Any, index: int, buffers: list[np.ndarray | None], source: str) -> Tensor:
    name = (t.Name() or b"").decode("utf-8", "replace")
    where = f"{source}: tensor {index} ({name!r})"
    type_id = t.Type()
    if type_id not in TENSOR_TYPES:
        raise ModelLoadError(f"{source}: tensor {index} has unknown TensorType {type_id}")
    type_name, dtype = TENSOR_TYPES[type_id]
    shape = tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else ()
    signature = (
        tuple(int(d) for d in t.ShapeSignatureAsNumpy()) if t.ShapeSignatureLength() else shape
    )
    if any(d < 0 for d in shape):
        # LiteRT refuses these at load too: the converter writes a concrete shape (1 for an
        # unknown dimension) and keeps -1 for shape_signature.
        raise ModelLoadError(
            f"{where} has shape {list(shape)}; expected dimensions >= 0 (a dynamic dimension "
            "is -1 in shape_signature, not in shape)"
        )
    # Python ints: a product of int32 dimensions can pass 2**64, where numpy's would wrap.
    count = math.prod(shape)
    if count * dtype.itemsize > _MAX_TENSOR_BYTES:
        raise ModelLoadError(
            f"{where} of shape {list(shape)} and type {type_name} holds {count} elements "
            f"({count * dtype.itemsize} bytes); expected at most {_MAX_TENSOR_BYTES} bytes, "
            "the most one array can address"
        )
    buf_index = t.Buffer()
    if not 0 <= buf_index < max(len(buffers), 1):
        raise ModelLoadError(
            f"{source}: tensor {index} refers to buffer {buf_index}, but the model has "
            f"{len(buffers)} buffers"
        )
    raw = buffers[buf_index] if buffers else None
    sparsity = _read_sparsity(t.Sparsity())
    data: np.ndarray | None = None
    if raw is not None:
        if dtype == np.dtype(object) or sparsity is not None:
            data = raw
        elif type_name == "INT4":
            # Two values a byte; LiteRT accepts a buffer at least that long.
            if raw.size < (count + 1) // 2:
                raise ModelLoadError(
                    f"{where} of shape {list(shape)} and type INT4 expects at least "
                    f"{(count + 1) // 2} bytes of packed constant data, found {raw.size}"
                )
            data = raw
        else:
            if raw.size != count * dtype.itemsize:
                raise ModelLoadError(
                    f"{where} of shape {list(shape)} and type {type_name} expects "
                    f"{count * dtype.itemsize} bytes of constant data, found {raw.size}"
                )
            data = raw.view(dtype)
        if data.flags.writeable:
            data = data.view()
            data.flags.writeable = False
    return Tensor(
        index=index,
        name=name,
        shape=shape,
        shape_signature=signature,
        dtype=dtype,
        type_name=type_name,
        quantization=_read_quantization(
            t.Quantization(), shape, type_name, data is not None, where
        ),
        sparsity=sparsity,
        data=data,
        is_variable=bool(t.IsVariable()),
    )


def _read_subgraph(
    sg: Any,
    sg_index: int,
    buffers: list[np.ndarray | None],
    opcodes: list[tuple[int, int, str | None]],
    source: str,
) -> Subgraph:
    tensors = tuple(
        _read_tensor(sg.Tensors(i), i, buffers, source) for i in range(sg.TensorsLength())
    )
    n = len(tensors)

    def indices(values: Any, what: str) -> tuple[int, ...]:
        out = tuple(int(v) for v in values) if isinstance(values, np.ndarray) else ()
        for v in out:
            if not -1 <= v < n:
                raise ModelLoadError(
                    f"{source}: subgraph {sg_index} {what} refers to tensor {v}, but the subgraph "
                    f"has {n} tensors (valid: 0..{n - 1}, or -1 for an omitted input)"
                )
        return out

    nodes = []
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        code_index = op.OpcodeIndex()
        if not 0 <= code_index < len(opcodes):
            raise ModelLoadError(
                f"{source}: node {i} refers to operator code {code_index}, but the model has "
                f"{len(opcodes)} operator codes"
            )
        builtin, version, custom = opcodes[code_index]
        name = BUILTIN_OPCODE2NAME.get(builtin, f"BUILTIN_{builtin}")
        options, ignored = _parse_options(op, name)
        nodes.append(
            Node(
                index=i,
                op=name,
                version=version,
                inputs=indices(op.InputsAsNumpy(), f"node {i} input"),
                outputs=indices(op.OutputsAsNumpy(), f"node {i} output"),
                options=options,
                ignored_options=ignored,
                intermediates=indices(op.IntermediatesAsNumpy(), f"node {i} intermediate"),
                custom_code=custom if name == "CUSTOM" else None,
                custom_options=bytes(op.CustomOptionsAsNumpy())
                if op.CustomOptionsLength()
                else b"",
                builtin_code=builtin,
            )
        )
    return Subgraph(
        index=sg_index,
        name=(sg.Name() or b"").decode("utf-8", "replace"),
        tensors=tensors,
        nodes=tuple(nodes),
        inputs=indices(sg.InputsAsNumpy(), "input list"),
        outputs=indices(sg.OutputsAsNumpy(), "output list"),
    )
