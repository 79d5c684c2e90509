"""One partition on the device: init (lower, build, upload), prepare (warm up), invoke.

``invoke`` enqueues the boundary-input uploads, every kernel and the boundary-output reads on
one in-order queue without waiting, then waits once: one host sync per invoke (with flushes
between, where the driver holds commands until one: see ``flush_every``). Intermediates
never leave the device; buffers are shared between tensors whose lifetimes do not overlap.
Partition inputs that a launch overwrites (a BASIC LSTM's previous activation and state) are
read back into the caller's arrays in the same sync, as the CPU kernel updates them in place.

With profiling switched on (``set_profiling``) the same commands go to a queue that timestamps
them, and after the sync each event's device time is added to its kernel family's totals.

Sizes are never taken on trust: the lowering has checked every shape and every launch's reach
(_lower), buffer sizes are held to the device's limits before any is allocated, and each
invoke checks that its inputs hold the element counts the buffers were made for.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyopencl as cl

from offload import DelegateKernel, DevicePeak, Partition, Subgraph, Tensor
from offload.ops import node_work
from offload.quant import dequantize, quantize
from offload_gpu_opencl._autotune import autotunes, gemm_chooser
from offload_gpu_opencl._cache import SerializationCache
from offload_gpu_opencl._device import build_program, open_device, profiling_queue, save_program
from offload_gpu_opencl._errors import GpuOpenCLError, check
from offload_gpu_opencl._ir import LINEAR, SLACK, Launch, Lowering, Ref, elements
from offload_gpu_opencl._lower import lower
from offload_gpu_opencl._peak import device_peak
from offload_gpu_opencl._replay import Launcher, LaunchSpec, make_launcher
from offload_gpu_opencl._source import source_hash
from offload_gpu_opencl._tiling import family_options

if TYPE_CHECKING:
    from offload_gpu_opencl import GpuOpenCLOptions

__all__ = ["GpuKernel", "partition_fingerprint"]

# Families of the profile's transfer rows: not kernel names (those are C identifiers).
UPLOAD, DOWNLOAD = "copy to device", "copy from device"

# GpuOpenCLOptions.flush_every's default on Mali GPUs, whose driver holds commands until a
# flush: LiteRT's GPU delegate flushes them every 24 operations. Elsewhere it flushes none
# mid-run, and on NVIDIA's driver flushing every 4-32 launches measured within noise of none
# (every 1-2: slower; benchmarks/RESULTS.md).
FLUSH_EVERY_MALI = 24


def partition_fingerprint(subgraph: Subgraph, partition: Partition) -> str:
    """sha256 of what the partition computes: nodes, tensor metadata and constant bytes."""
    h = hashlib.sha256()
    seen: set[int] = set()
    for n in partition.nodes:
        node = subgraph.nodes[n]
        h.update(f"N{node.op}{node.version}{node.inputs}{node.outputs}{node.options!r}".encode())
        for t in (*node.inputs, *node.outputs):
            if t < 0 or t in seen:
                continue
            seen.add(t)
            x = subgraph.tensors[t]
            q = x.quantization
            h.update(f"T{t}{x.shape}{x.dtype}".encode())
            if q is not None:
                h.update(
                    q.scale.tobytes() + q.zero_point.tobytes() + bytes([q.quantized_dimension])
                )
            if x.is_constant:  # folded constants too: the core made their values before init
                h.update(np.asarray(x.data).tobytes())
    return h.hexdigest()


def _to_float(tensor: Tensor) -> Callable[[np.ndarray], np.ndarray]:
    """Host conversion of a boundary input into the float view."""
    if tensor.quantization is not None and np.issubdtype(tensor.dtype, np.integer):
        return lambda a: dequantize(a, tensor.quantization)
    return lambda a: a


def _from_float(tensor: Tensor) -> Callable[[np.ndarray], np.ndarray]:
    """Host conversion of a float-view boundary output back to the tensor's dtype."""
    shape, dtype, q = tensor.shape, tensor.dtype, tensor.quantization
    if q is not None and np.issubdtype(dtype, np.integer):
        return lambda a: quantize(a.reshape(shape), q, dtype)
    if dtype == np.bool_:
        return lambda a: a.reshape(shape) != 0
    return lambda a: a.reshape(shape).astype(dtype, copy=False)


class GpuKernel(DelegateKernel):
    # invoke reads every output into a new host array: the interpreter need not copy them.
    fresh_outputs = True

    def __init__(self, options: GpuOpenCLOptions, version: str) -> None:
        self.options = options
        self.version = version
        # Where the program and constants came from, launches: see stats().
        self._stats: dict[str, Any] = {}
        self._device_bytes = 0
        # Profiling (see set_profiling): the timestamping queue while on, else None;
        # (family, kind) -> [launches, device ns, flops]; invokes measured.
        self._profile_queue: cl.CommandQueue | None = None
        self._timings: dict[tuple[str, str], list[int]] = {}
        self._profiled_invokes = 0

    # -- init -------------------------------------------------------------------------------

    def init(self, subgraph: Subgraph, partition: Partition) -> None:
        opts = self.options
        self.subgraph, self.partition = subgraph, partition
        self.handle = handle = open_device(opts.platform, opts.device)
        self._stats["device"] = handle.name
        half = opts.precision_loss_allowed
        family = family_options(opts.kernel_family, handle.device)
        # The fused depthwise products exist in the GPU family only, and are compiled only
        # where a partition may launch them (they double the program's build time). By
        # default they run where the autotuner times each one's tile: with the plain
        # product's rule-of-thumb tile they were slower on an H200 (benchmarks/RESULTS.md).
        fuse = opts.fuse_depthwise
        if fuse is None:
            fuse = autotunes(opts, handle)
        self.fuse_depthwise = (
            fuse
            and "-DTILED_GEMM" in family
            and any(subgraph.nodes[n].op == "DEPTHWISE_CONV_2D" for n in partition.nodes)
        )
        self.build_options = " ".join(
            (["-DSTORE_HALF"] if half else [])
            + (["-DCOMPUTE_HALF"] if half and handle.has_fp16 else [])
            + (["-DPLAIN_ACCESS"] if handle.plain_access else [])
            + family
            + (["-DFUSE_DW"] if self.fuse_depthwise else [])
        )
        self.store_dtype = np.dtype(np.float16 if half else np.float32)
        # Convolution parameters (_source's param_t): float32 where halves are converted with
        # integer operations (PLAIN_ACCESS without fp16), else the storage type.
        plain_half = half and handle.plain_access and not handle.has_fp16
        self.param_dtype = np.dtype(np.float32) if plain_half else self.store_dtype

        identity = {"device": handle.name, "driver": handle.driver, "plugin_version": self.version}
        # model_token names the entries; the content hash guards them (it is in every entry's
        # context), so a token reused for a model with other weights never loads stale ones.
        content = ""
        if opts.serialization_dir or not opts.model_token:
            content = partition_fingerprint(subgraph, partition)
        self.cache = cache = (
            SerializationCache(opts.serialization_dir, identity, content)
            if opts.serialization_dir
            else None
        )
        if opts.model_token:
            where = f"p{partition.index}:{partition.nodes[0]}:{len(partition.nodes)}"
            token = f"{opts.model_token}|{where}"
        else:
            token = content
        self.key = hashlib.sha256("|".join((token, *identity.values())).encode()).hexdigest()

        # The CONV_2D / FULLY_CONNECTED kernels for this device (None: the CPU family); a
        # GPU's tile choices may be timed here, once per product (see _autotune).
        gemm = gemm_chooser(handle, opts, self.build_options, cache, self.key)

        # The constants' layouts are what the kernels expect: key them by the kernel source too,
        # so a plugin whose kernels changed never reads constants laid out for the old ones.
        consts_key = f"{self.key}:consts:{source_hash('')}"
        cached = cache.load_arrays(consts_key) if cache else None
        try:
            lowering = lower(
                subgraph, partition, cached, gemm, self.fuse_depthwise, opts.fuse_gates
            )
        except GpuOpenCLError as exc:
            if cache is None or not cached:
                raise
            # Lowering checks every launch's reach against the buffers it is given, cached
            # constants included: constants that do not fit are dropped and made again.
            cache.discard(consts_key, "npz", f"the cached constants do not fit ({exc})")
            cached = None
            lowering = lower(
                subgraph,
                partition,
                gemm=gemm,
                fuse_depthwise=self.fuse_depthwise,
                fuse_gates=opts.fuse_gates,
            )
        stale = cached is None or lowering.misses or set(cached) != set(lowering.consts)
        if cache is not None and stale:
            cache.store_arrays(consts_key, lowering.consts)
        reused = cached is not None and not lowering.misses
        self._stats["constants"] = "cache" if reused else "built"
        self._stats["kernels"] = gemm.summary() if gemm else {"family": "cpu"}
        if self.fuse_depthwise:
            self._stats["depthwise_fused"] = len(lowering.depthwise_into)
        if gemm is not None:
            self._stats["gates_fused"] = len(lowering.gated)
            self._stats["squeezes_fused"] = len(lowering.squeezes)

        self.program, origin = build_program(handle, self.build_options, cache, self.key)
        self._stats["program"] = origin
        self._needs_save = cache is not None and origin != "binary"
        self._warmed = origin == "binary"
        flush_every = opts.flush_every
        if flush_every is None:
            flush_every = FLUSH_EVERY_MALI if "mali" in handle.name.lower() else 0
        self.flush_every = flush_every
        self._stats["flush_every"] = flush_every
        self._setup(lowering)

    def _setup(self, lw: Lowering) -> None:
        ctx, sg, part = self.handle.context, self.subgraph, self.partition
        itemsize = self.store_dtype.itemsize
        launches = lw.launches
        end = len(launches)

        # Lifetimes of runtime storages (alias roots), in launch positions.
        first: dict[int, int] = {}
        last: dict[int, int] = {}

        def touch(t: int, pos: int) -> None:
            first[t] = min(first.get(t, pos), pos)
            last[t] = max(last.get(t, pos), pos)

        # Partition inputs and outputs are runtime tensors: constants, folded ones included,
        # are Partition.constants, uploaded once by the lowering.
        # (storage, host conversion, elements the storage holds)
        self.inputs: list[tuple[int, Callable[[np.ndarray], np.ndarray], int]] = []
        # Inputs a launch overwrites (a BASIC LSTM's state): (position, storage, elements),
        # read back into the caller's array after each invoke, as the CPU kernel writes it.
        self.writebacks: list[tuple[int, int, int]] = []
        for pos, t in enumerate(part.inputs):
            count = elements(sg.tensors[t].shape)
            root = lw.root(t)
            touch(root, -1)
            self.inputs.append((root, _to_float(sg.tensors[t]), count))
            if root in lw.writebacks:
                touch(root, end)
                self.writebacks.append((pos, root, count))
        for pos, launch in enumerate(launches):
            for ref in launch.buffers:
                if ref.kind == "t":
                    touch(int(ref.key), pos)
        # (storage, conversion back from the float view, elements read)
        self.outputs: list[tuple[int, Callable[[np.ndarray], np.ndarray], int]] = []
        for t in part.outputs:
            tensor = sg.tensors[t]
            root = lw.root(t)
            touch(root, end)
            self.outputs.append((root, _from_float(tensor), elements(tensor.shape)))

        # Greedy best-fit reuse by lifetime, planned as slot sizes first: every byte count is
        # checked against the device before anything is allocated.
        sizes = {t: elements(sg.tensors[t].shape) for t in first}
        order = sorted(first, key=lambda t: (first[t], t))
        slots: list[int] = []  # bytes of each runtime buffer
        free: list[int] = []
        held: dict[int, int] = {}
        slot_of: dict[int, int] = {}
        pending_release = sorted(first, key=lambda t: last[t])
        for t in order:
            while pending_release and last[pending_release[0]] < first[t]:
                done = pending_release.pop(0)
                if done in held:
                    free.append(held.pop(done))
            need = (sizes[t] + SLACK) * itemsize
            fits = [s for s in free if slots[s] >= need]
            if fits:
                slot = min(fits, key=lambda s: slots[s])
                free.remove(slot)
            else:
                slot = len(slots)
                slots.append(need)
            held[t] = slot_of[t] = slot
        const_bytes = {
            name: (arr.size + SLACK)
            * (self.param_dtype if name in lw.params else self.store_dtype).itemsize
            for name, arr in lw.consts.items()
        }
        # Split-K partial sums: float32 whatever the storage, written by launches.
        work_bytes = {name: (count + SLACK) * 4 for name, count in lw.scratch.items()}
        self._check_device_memory(slots, {**const_bytes, **work_bytes})

        # Constants in storage precision, padded with slack.
        mf = cl.mem_flags
        self.constants: dict[str, cl.Buffer] = {}
        for name, arr in lw.consts.items():
            dtype = self.param_dtype if name in lw.params else self.store_dtype
            data = np.zeros(arr.size + SLACK, dtype)
            data[: arr.size] = arr.ravel()
            self.constants[name] = check(
                "clCreateBuffer", cl.Buffer, ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=data
            )
        for name, size in work_bytes.items():
            zeros = np.zeros(size // 4, np.float32)
            self.constants[name] = check(
                "clCreateBuffer", cl.Buffer, ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=zeros
            )
        made = [check("clCreateBuffer", cl.Buffer, ctx, mf.READ_WRITE, need) for need in slots]
        self.buffers: dict[int, cl.Buffer] = {t: made[slot] for t, slot in slot_of.items()}
        # Half storage: each input goes up as float32 into a staging buffer of its own and is
        # converted on the device (cl/to_store.cl); float32 storage uploads straight.
        self.staging: list[tuple[cl.Buffer, cl.Kernel, tuple[int, ...]] | None] = []
        staged = 0
        for root, _convert, count in self.inputs:
            if self.store_dtype == np.float32:
                self.staging.append(None)
                continue
            size = (count + SLACK) * 4
            buffer = check("clCreateBuffer", cl.Buffer, ctx, mf.READ_ONLY, size)
            kernel = check("clCreateKernel(to_store)", cl.Kernel, self.program, "to_store")
            check(
                "clSetKernelArg(to_store)",
                kernel.set_args,
                buffer,
                self.buffers[root],
                np.int32(count),
            )
            self.staging.append((buffer, kernel, (-(-count // LINEAR[0]) * LINEAR[0],)))
            staged += size
        self._device_bytes = (
            sum(slots) + sum(const_bytes.values()) + sum(work_bytes.values()) + staged
        )
        self._stats["launches"] = end

        def resolve(a: Ref | np.generic) -> Any:
            if isinstance(a, Ref):
                return self.constants[str(a.key)] if a.kind == "c" else self.buffers[int(a.key)]
            return a

        # Arguments are set once here; invoke only enqueues.
        self.calls: list[tuple[cl.Kernel, tuple[int, ...], tuple[int, ...]]] = []
        for launch in launches:
            kernel = self._make_kernel(launch, resolve)
            self.calls.append((kernel, launch.global_size, launch.local_size))
        # Unprofiled invokes enqueue the input conversions and the launches as recorded once
        # (_replay); the profiling queue enqueues them one by one, each with its event.
        staged_calls: list[LaunchSpec] = [
            (kernel, size, LINEAR) for _b, kernel, size in filter(None, self.staging)
        ]
        self.launcher: Launcher = make_launcher(
            self.options.enqueue, self.handle.queue, [*staged_calls, *self.calls], self.flush_every
        )
        self._stats["enqueue"] = self.launcher.mode
        if self.launcher.reason:
            self._stats["enqueue_reason"] = self.launcher.reason
        # For the profile: each launch's family and work (the core's rule, offload.ops'
        # node_work). A node's arithmetic is its first launch's (what follows it, a
        # fake-quantize or a reduction, only moves values).
        self._families = [launch.kernel for launch in launches]
        self._flops = []
        counted: set[int] = set()
        for launch in launches:
            leads = launch.node not in counted
            counted.add(launch.node)
            self._flops.append(node_work(sg.nodes[launch.node], sg).flops if leads else 0)

    def _check_device_memory(self, slots: list[int], const_bytes: dict[str, int]) -> None:
        """Refuse buffers the device cannot hold, before allocating any: a driver that does
        not check (PoCL hands out host memory) would fail later, or worse."""
        device = self.handle.device
        most, total = int(device.max_mem_alloc_size), int(device.global_mem_size)
        sizes = [*slots, *const_bytes.values()]
        if sizes and max(sizes) > most:
            raise GpuOpenCLError(
                f"a buffer of this partition needs {max(sizes):,} bytes, more than the "
                f"{most:,} one allocation may take on {self.handle.name}"
            )
        if sum(sizes) > total:
            raise GpuOpenCLError(
                f"this partition needs {sum(sizes):,} bytes of device memory, more than the "
                f"{total:,} of {self.handle.name}"
            )

    def _make_kernel(self, launch: Launch, resolve: Callable[[Any], Any]) -> cl.Kernel:
        kernel = check(f"clCreateKernel({launch.kernel})", cl.Kernel, self.program, launch.kernel)
        args = [resolve(a) for a in launch.args]
        check(f"clSetKernelArg({launch.kernel})", kernel.set_args, *args)
        return kernel

    # -- introspection ----------------------------------------------------------------------

    def memory_bytes(self) -> dict[str, int]:
        """Device buffers (runtime slots and constants, slack included) and host arrays kept.

        No host array outlives an invoke: constants are copied into their buffers at init and
        the staging arrays of each invoke are dropped after it, so host is 0.
        """
        return {"device": self._device_bytes, "host": 0}

    def stats(self) -> dict[str, Any]:
        """``program``: where the program came from (``source``, ``binary`` from the cache,
        ``memo`` from this process); ``constants``: ``built`` or ``cache``; ``launches`` per
        invoke. A copy, so a caller cannot change the kernel's. Bytes are memory_bytes()'s."""
        return dict(self._stats)

    def set_profiling(self, enabled: bool) -> bool:
        """Time every command of each invoke on the device from now on (from zero), or stop.

        The commands go to the device's timestamping queue while profiling is on, so the
        queue of unprofiled invokes never pays for timestamps."""
        self._profile_queue = profiling_queue(self.handle) if enabled else None
        self._timings = {}
        self._profiled_invokes = 0
        return enabled

    def device_peak(self) -> DevicePeak:
        """The device's float32 multiply-add and memory roofs, measured by its own kernels
        at the first call for this device and driver in the process (see _peak)."""
        return device_peak(self.handle)

    def profile(self) -> dict[str, Any] | None:
        """Per kernel family (the kernel function's name) and per transfer direction: launches,
        device milliseconds and FLOPs since set_profiling(True); None while it is off."""
        if self._profile_queue is None:
            return None
        kernels = [
            {"family": family, "kind": kind, "launches": n, "device_ms": ns / 1e6, "flops": fl}
            for (family, kind), (n, ns, fl) in sorted(self._timings.items())
        ]
        return {"invokes": self._profiled_invokes, "kernels": kernels, "device": self.handle.name}

    def _record(self, events: list[tuple[str, str, int, cl.Event]]) -> None:
        """Add the finished commands' device times (nanoseconds, end - start) to the totals."""
        for family, kind, flops, event in events:
            totals = self._timings.setdefault((family, kind), [0, 0, 0])
            totals[0] += 1
            totals[1] += max(0, int(event.profile.end) - int(event.profile.start))
            totals[2] += flops
        self._profiled_invokes += 1

    # -- prepare ----------------------------------------------------------------------------

    def prepare(self, input_shapes: Sequence[tuple[int, ...]]) -> None:
        sg = self.subgraph
        for t, shape in zip(self.partition.inputs, input_shapes):
            if tuple(shape) != tuple(sg.tensors[t].shape):
                raise GpuOpenCLError(
                    f"gpu_opencl runs partitions at the model's static shapes; input tensor {t} "
                    f"({sg.tensors[t].name!r}) was resized from {list(sg.tensors[t].shape)} to "
                    f"{list(shape)}. Resize before delegating (or run without gpu_opencl)."
                )
        if not self._warmed:
            # The first run makes drivers that compile lazily (PoCL) finish compiling now, at
            # allocate_tensors time, and puts that code into the program binary we cache.
            tensors = [sg.tensors[t] for t in self.partition.inputs]
            self.invoke([np.zeros(t.shape, t.dtype) for t in tensors])
            self._warmed = True
        if self._needs_save and self.cache is not None:
            save_program(self.handle, self.build_options, self.cache, self.key)
            self._needs_save = False

    # -- invoke -----------------------------------------------------------------------------

    def invoke(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        profiling = self._profile_queue
        queue = self.handle.queue if profiling is None else profiling
        # (family, kind, flops, event) of every command, only while profiling.
        events: list[tuple[str, str, int, cl.Event]] | None = None if profiling is None else []
        store = self.store_dtype
        keep = []
        launcher = self.launcher if profiling is None else None
        for (root, convert, count), stage, value in zip(self.inputs, self.staging, inputs):
            dtype = store if stage is None else np.float32
            host = np.ascontiguousarray(convert(value), dtype=dtype)
            if host.size != count:  # the copy would run past the storage (or leave it short)
                raise GpuOpenCLError(
                    f"a partition input holds {host.size} values; gpu_opencl built the "
                    f"partition for {count}"
                )
            keep.append(host)
            target = self.buffers[root] if stage is None else stage[0]
            event = cl.enqueue_copy(queue, target, host, is_blocking=False)
            if events is not None:
                events.append((UPLOAD, "transfer", 0, event))
            if stage is not None and events is not None:
                event = cl.enqueue_nd_range_kernel(queue, stage[1], stage[2], LINEAR)
                events.append(("to_store", "kernel", 0, event))
        if launcher is not None:
            launcher.enqueue()
        else:
            flush_every = self.flush_every
            for pos, (kernel, global_size, local_size) in enumerate(self.calls):
                event = cl.enqueue_nd_range_kernel(queue, kernel, global_size, local_size)
                if events is not None:
                    events.append((self._families[pos], "kernel", self._flops[pos], event))
                if flush_every and pos % flush_every == 0:
                    check("clFlush", queue.flush)
        reads = []
        for root, _convert, count in self.outputs:
            host = np.empty(count, store)
            event = cl.enqueue_copy(queue, host, self.buffers[root], is_blocking=False)
            if events is not None:
                events.append((DOWNLOAD, "transfer", 0, event))
            reads.append(host)
        written = []
        for _pos, root, count in self.writebacks:
            host = np.empty(count, store)
            event = cl.enqueue_copy(queue, host, self.buffers[root], is_blocking=False)
            if events is not None:
                events.append((DOWNLOAD, "transfer", 0, event))
            written.append(host)
        check("clFinish", queue.finish)
        if events is not None:
            self._record(events)
        for (pos, _root, _count), host in zip(self.writebacks, written):
            given = inputs[pos]
            if isinstance(given, np.ndarray) and given.flags.writeable:
                given[...] = host.reshape(given.shape)
        return [convert(host) for (_root, convert, _count), host in zip(self.outputs, reads)]
