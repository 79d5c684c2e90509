"""Delegates with known behaviour for the auto and default tests, installed by monkeypatching
what ``offload._auto`` and ``offload._selection`` discover, so the tests do not depend on
which real engines are installed (or how fast this machine is today)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence

import numpy as np
import pytest

import offload
from offload import (
    Capabilities,
    Delegate,
    DelegateKernel,
    DelegateOptions,
    ModelTypeSupport,
    _auto,
    _auto_measure,
    _selection,
)
from offload._plugins import DelegateRecord, PluginRecord
from offload.model.builder import ModelBuilder

_YES = ModelTypeSupport(support="yes")
_TYPES = dict.fromkeys(("float32", "float16", "dynamic_range", "int8", "qat"), _YES)
_FUNCS = {"ADD": np.add, "MUL": np.multiply}
INITS: Counter[str] = Counter()  # kernels initialised, by class: a cached choice makes none


def chain_model(ops: Sequence[str] = ("ADD", "MUL") * 6, size: int = 16, seed: int = 0) -> bytes:
    """x[1, size] through ``ops`` in a chain, each with a constant second operand."""
    rng = np.random.default_rng(seed)
    b = ModelBuilder()
    x = b.add_input("x", shape=(1, size))
    for k, op in enumerate(ops):
        out = b.add_tensor(f"t{k}", shape=(1, size))
        if op == "TANH":
            b.add_operator("TANH", inputs=[x], outputs=[out])
        else:
            c = b.add_constant(f"c{k}", rng.uniform(0.5, 1.5, (1, size)).astype(np.float32))
            b.add_operator(op, inputs=[x, c], outputs=[out])
        x = out
    b.add_output(x)
    return b.build()


class FakeOptions(DelegateOptions):
    num_threads: int = 1


class FakeKernel(DelegateKernel):
    """Runs ADD/MUL chains with numpy; subclasses add delays and faults."""

    delay_s = 0.0
    offset = 0.0

    def init(self, subgraph: offload.Subgraph, partition: offload.Partition) -> None:
        INITS[type(self).__name__] += 1
        self.partition = partition
        self.steps = [
            (_FUNCS[node.op], node.inputs, node.outputs[0])
            for node in (subgraph.nodes[n] for n in partition.nodes)
        ]
        self.constants = {t: subgraph.tensors[t].constant_value() for t in partition.constants}

    def invoke(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        if self.delay_s:
            time.sleep(self.delay_s)
        values = dict(self.constants)
        values.update(zip(self.partition.inputs, inputs))
        for func, (a, b), out in self.steps:
            values[out] = func(values[a], values[b])
        return [values[t] + np.float32(self.offset) for t in self.partition.outputs]


class SlowKernel(FakeKernel):
    delay_s = 0.02


class WrongKernel(FakeKernel):
    offset = 0.5


class BrokenKernel(FakeKernel):
    def init(self, subgraph: offload.Subgraph, partition: offload.Partition) -> None:
        raise RuntimeError("no device today")


class FlakyKernel(FakeKernel):
    def invoke(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        raise RuntimeError("lost the device")


def fake_delegate(name: str, kernel: type[FakeKernel], ops: Sequence[str] = ("ADD", "MUL")) -> type:
    caps = Capabilities(
        ops=tuple(offload.OpCapability(op=op) for op in ops),
        model_types=_TYPES,
        expected_speedup=2.0,
        partition_overhead=1.0,
    )

    class Fake(Delegate):
        version = "1.0"
        Options = FakeOptions
        CAPABILITIES = caps

        def create_kernel(self) -> DelegateKernel:
            return kernel()

    Fake.name = name
    Fake.__name__ = f"Fake_{name}"
    return Fake


FAST = fake_delegate("fast", FakeKernel)
SLOW = fake_delegate("slow", SlowKernel)
WRONG = fake_delegate("wrong", WrongKernel)
BROKEN = fake_delegate("broken", BrokenKernel)
FLAKY = fake_delegate("flaky", FlakyKernel)
ADD_ONLY = fake_delegate("addonly", FakeKernel, ops=("ADD",))
# The default engine's name: the default applies the delegate called litert.
LITERT = fake_delegate("litert", FakeKernel)


class ExactOptions(FakeOptions):
    exact: bool = False


class SettingKernel(FakeKernel):
    """Wrong by default, right with ``exact=True``: an engine whose fast setting misses the
    accuracy policy and whose exact one meets it (XNNPACK and LiteRT's builtin kernels)."""

    def __init__(self, exact: bool) -> None:
        self.offset = 0.0 if exact else 0.5


class _TwoSettings(fake_delegate("settings", FakeKernel)):  # type: ignore[misc]
    Options = ExactOptions

    @classmethod
    def auto_variants(cls) -> tuple[dict[str, bool], ...]:
        return ({"exact": True},)

    def create_kernel(self) -> DelegateKernel:
        return SettingKernel(self.options.exact)


TWO_SETTINGS: type[Delegate] = _TwoSettings


def install(monkeypatch: pytest.MonkeyPatch, *classes: type[Delegate]) -> None:
    """Make ``classes`` the installed delegates as auto and the default see them."""
    records = [
        DelegateRecord(c.name, c, f"plugin_{c.name}", c.version, offload.Availability(True))
        for c in classes
    ]
    plugins = [PluginRecord(f"plugin_{c.name}", "", "", "loaded") for c in classes]
    by_name = {c.name: c for c in classes}

    def delegate_class(name: str) -> type[Delegate]:
        if name not in by_name:
            raise offload.errors.PluginError(f"no delegate named {name!r} is installed")
        return by_name[name]

    monkeypatch.setattr(_auto, "list_delegates", lambda: list(records))
    monkeypatch.setattr(_auto, "list_plugins", lambda: list(plugins))
    monkeypatch.setattr(_auto, "delegate_class", delegate_class)
    monkeypatch.setattr(_selection, "list_delegates", lambda: list(records))
    monkeypatch.setattr(
        _selection, "load_delegate", lambda name, options=None: delegate_class(name)(options)
    )


def slow_reference(monkeypatch: pytest.MonkeyPatch, delay_s: float = 0.005) -> None:
    """Make the CPU reference's runs take ``delay_s`` longer, so a plain numpy candidate is
    reliably faster than it on any machine."""
    run = _auto_measure._run

    def slowed(executor, inputs):  # type: ignore[no-untyped-def]
        elapsed, outputs = run(executor, inputs)
        if not executor.delegates:
            time.sleep(delay_s)
            elapsed += delay_s
        return elapsed, outputs

    monkeypatch.setattr(_auto_measure, "_run", slowed)
