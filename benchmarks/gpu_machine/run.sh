#!/usr/bin/env bash
# On the GPU machine, from the checkout's root, with out/gpu_run made by prepare.sh carried
# along: make NVIDIA's OpenCL and Vulkan drivers reachable, install the wheels, refill the
# models, run benchmarks/gpu_vs_litert.py --markdown --profile, and leave everything in $OUT:
#
#   results.md     the tables for benchmarks/RESULTS.md (device named)
#   results.json   every figure (written after each model: a run cut short keeps its part)
#   benchmark.log  the benchmark's stderr (LiteRT's and the drivers' own logs)
#   run.log        what this script did and found
#   preflight.log  the device's limits, program build times, registers and spills per kernel
#   roofline.txt   `offload benchmark --roofline` of each model on gpu_opencl (ROOFLINE=0: skip;
#                  ROOFLINE_BUDGET seconds in all, 150 by default; ROOFLINE_TIMEOUT per model)
#
# Nothing here needs a GPU: without NVIDIA's libraries gpu_opencl runs on whatever OpenCL
# device is registered (PoCL) and LiteRT's GPU column says why it cannot run. On a Python other
# than 3.12 the wheels are not installed and this Python's own packages are used (a test run).
#
# Environment: OUT (default out/gpu_run/results), PYTHON (python3), RUNS (30), BLOCK (runs of a
# column in a row per round, 1), MODELS (substrings of model names, space separated; default
# all), BENCH_TIMEOUT (540 s), FLUSH_SWEEP (flush intervals for extra gpu_opencl columns, space
# separated; default none), ENQUEUE_SWEEP (gpu_opencl enqueue modes for extra f32 columns:
# auto command_buffer pyopencl; default none), FUSE_DEPTHWISE (1: gpu_opencl f32 columns with
# every depthwise -> 1x1 pair fused and with none), FUSE_GATES (1: gpu_opencl f32 columns
# without the squeeze-excite fusions, and with each gate in three launches), FUSION_PAIRS (1: fusion_pairs.txt, each
# pair's device times fused and apart), BENCH / PREFLIGHT (0: skip that step).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUNDLE=${BUNDLE:-$ROOT/out/gpu_run}
OUT=${OUT:-$BUNDLE/results}
PY=${PYTHON:-python3}
RUNS=${RUNS:-30}
NVIDIA_LIB=${NVIDIA_LIB:-/usr/local/nvidia/lib64}
NVIDIA_VULKAN_ICD=${NVIDIA_VULKAN_ICD:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
mkdir -p "$OUT"
WORK=$(mktemp -d)
LOG="$OUT/run.log"
: >"$LOG"

log() { echo "[run.sh] $*" | tee -a "$LOG" >&2; }

if [[ ! -d "$BUNDLE/models" ]]; then
    log "no $BUNDLE/models: run benchmarks/gpu_machine/prepare.sh first and carry out/gpu_run"
    exit 2
fi
log "$(date -u '+%F %T UTC') on $(hostname); $($PY --version 2>&1) at $(command -v "$PY")"
command -v nvidia-smi >/dev/null && nvidia-smi -L 2>&1 | tee -a "$LOG" >&2

# -- OpenCL: the image has NVIDIA's library but no ICD file naming it ------------------------------
# As seen working there (GPU.md): an ICD file in /etc/OpenCL/vendors. Where that folder cannot be
# written (not root), a vendors folder of our own, the system's ICDs copied in, named to the ICD
# loader (ocl-icd, inside the pyopencl wheel) by OCL_ICD_VENDORS.
ICD_DIR=${ICD_DIR:-/etc/OpenCL/vendors}
nvidia_cl="$NVIDIA_LIB/libnvidia-opencl.so.1"
if [[ ! -e "$nvidia_cl" ]]; then
    log "OpenCL: no $nvidia_cl: gpu_opencl uses the devices registered here (PoCL?)"
elif mkdir -p "$ICD_DIR" 2>/dev/null && echo "$nvidia_cl" 2>/dev/null >"$ICD_DIR/nvidia.icd"; then
    log "OpenCL: $nvidia_cl registered in $ICD_DIR/nvidia.icd"
else
    mkdir -p "$WORK/vendors"
    cp /etc/OpenCL/vendors/*.icd "$WORK/vendors/" 2>/dev/null
    echo "$nvidia_cl" >"$WORK/vendors/nvidia.icd"
    export OCL_ICD_VENDORS="$WORK/vendors"
    log "OpenCL: $ICD_DIR not writable; OCL_ICD_VENDORS=$OCL_ICD_VENDORS ($(ls "$WORK/vendors" | tr '\n' ' '))"
fi

# -- Vulkan (LiteRT's GPU path: WebGPU on Vulkan): the loader from the .deb, NVIDIA's driver ------
# NVIDIA's Vulkan driver (libGLX_nvidia) needs libglvnd's libGLdispatch: the loader alone finds
# "no drivers". As root on a machine with NVIDIA's Vulkan driver the packages go where the
# system looks (what was seen working there); otherwise into a folder of ours on
# LD_LIBRARY_PATH.
debs=("$BUNDLE"/debs/*.deb)
if [[ ! -e "${debs[0]}" ]] || ! command -v dpkg >/dev/null; then
    log "Vulkan: no loader unpacked (no .deb or no dpkg): LiteRT GPU will say n/a"
elif [[ $(id -u) -eq 0 && -e "$NVIDIA_VULKAN_ICD" ]]; then
    for deb in "${debs[@]}"; do dpkg -x "$deb" / 2>>"$LOG"; done
    ldconfig 2>>"$LOG"
    log "Vulkan: $(basename -a "${debs[@]}" | cut -d_ -f1 | tr '\n' ' ')unpacked into / (ldconfig)"
else
    for deb in "${debs[@]}"; do dpkg -x "$deb" "$WORK/vulkan" 2>>"$LOG"; done
    libdir=$(dirname "$(find "$WORK/vulkan" -name 'libvulkan.so.1' | head -1)")
    export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    log "Vulkan: loader and GL dispatch libraries in $libdir"
fi
if [[ -e "$NVIDIA_VULKAN_ICD" ]]; then
    export VK_DRIVER_FILES="$NVIDIA_VULKAN_ICD" VK_ICD_FILENAMES="$NVIDIA_VULKAN_ICD"
    log "Vulkan: driver $NVIDIA_VULKAN_ICD"
else
    log "Vulkan: no NVIDIA driver manifest at $NVIDIA_VULKAN_ICD"
fi

# -- Python packages: the wheels where this is the Python they were made for --------------------
SITE="$WORK/site"
if "$PY" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))'; then
    if "$PY" -m pip install --quiet --no-index --no-deps --target "$SITE" "$BUNDLE"/wheels/*.whl \
        >>"$LOG" 2>&1; then
        log "installed $(ls "$BUNDLE"/wheels/*.whl | wc -l) wheels into $SITE"
    else
        log "pip install of the wheels failed (see above); going on with what this Python has"
    fi
else
    log "$($PY --version 2>&1) is not 3.12: wheels not installed, using this Python's packages"
fi
# The checkout's offload and plugins first (from source: nothing to build), then the wheels (whose
# offload distributions give the plugins' entry points).
export PYTHONPATH="$ROOT/core:$ROOT/plugins/gpu_opencl:$ROOT/plugins/litert:$SITE${PYTHONPATH:+:$PYTHONPATH}"
"$PY" - >>"$LOG" 2>&1 <<'EOF'
import importlib

for name in ("numpy", "pydantic", "tflite", "pyopencl", "ai_edge_litert", "ml_dtypes", "offload",
             "offload_gpu_opencl", "offload_litert"):
    try:
        module = importlib.import_module(name)
        print(f"import {name}: {getattr(module, '__version__', '')} {module.__file__}")
    except Exception as exc:
        print(f"import {name}: FAILED {type(exc).__name__}: {exc}")
import offload

print("offload delegates installed:", [d.name for d in offload.list_delegates()])
EOF
tail -10 "$LOG" >&2

# -- models -------------------------------------------------------------------------------------
mkdir -p "$WORK/models"
for packed in "$BUNDLE"/models/*.xz; do
    name=$(basename "$packed")
    case "$name" in
    *.tflite.hollow.xz) "$PY" "$ROOT/benchmarks/gpu_machine/hollow.py" fill "$packed" "$WORK/models/${name%.hollow.xz}" ;;
    *.tflite.xz) "$PY" "$ROOT/benchmarks/gpu_machine/hollow.py" unpack "$packed" "$WORK/models/${name%.xz}" ;;
    *) continue ;;
    esac 2>>"$LOG" || log "could not unpack $name"
done
log "models: $(ls "$WORK/models" | tr '\n' ' ')"

# -- preflight: the program builds there? registers and spills per tiled kernel -----------------
if [[ "${PREFLIGHT:-1}" != 0 ]]; then
    timeout 180 "$PY" "$ROOT/benchmarks/gpu_machine/preflight.py" >"$OUT/preflight.log" 2>&1
    log "preflight exit $? ($(head -2 "$OUT/preflight.log" | tr '\n' ' '))"
fi

# -- per depthwise -> 1x1 pair: device times fused and not (FUSION_PAIRS=1) ----------------------
if [[ "${FUSION_PAIRS:-0}" != 0 ]]; then
    pairs=()
    for model in "$WORK"/models/*.tflite; do
        wanted=${MODELS:-all}
        for part in ${MODELS:-}; do [[ $(basename "$model") == *"$part"* ]] && wanted=all; done
        [[ $wanted == all ]] && pairs+=("$model")
    done
    timeout "${PAIRS_TIMEOUT:-240}" "$PY" "$ROOT/benchmarks/gpu_machine/fusion_pairs.py" "${pairs[@]}" \
        >"$OUT/fusion_pairs.txt" 2>"$OUT/fusion_pairs.log"
    log "fusion_pairs exit $? ($(grep -c '^{' "$OUT/fusion_pairs.txt") pairs)"
fi

# -- the benchmark ------------------------------------------------------------------------------
args=(--model-dir "$WORK/models" --runs "$RUNS" --block "${BLOCK:-1}" --profile --write-json "$OUT/results.json")
# shellcheck disable=SC2206  # MODELS is a space-separated list on purpose
[[ -n "${MODELS:-}" ]] && args+=(--models ${MODELS})
# shellcheck disable=SC2206  # FLUSH_SWEEP too: gpu_opencl f32 columns flushing every N launches
[[ -n "${FLUSH_SWEEP:-}" ]] && args+=(--flush-sweep ${FLUSH_SWEEP})
# shellcheck disable=SC2206  # ENQUEUE_SWEEP too: gpu_opencl f32 columns per enqueue mode
[[ -n "${ENQUEUE_SWEEP:-}" ]] && args+=(--enqueue-sweep ${ENQUEUE_SWEEP})
[[ "${FUSE_DEPTHWISE:-0}" != 0 ]] && args+=(--fuse-depthwise)
[[ "${FUSE_GATES:-0}" != 0 ]] && args+=(--fuse-gates)
status=0
if [[ "${BENCH:-1}" != 0 ]]; then
    log "running gpu_vs_litert.py ${args[*]}"
    start=$(date +%s)
    # Stopped in time to write the tables (the device machine ends a command at 600 s).
    timeout "${BENCH_TIMEOUT:-540}" "$PY" "$ROOT/benchmarks/gpu_vs_litert.py" "${args[@]}" --markdown \
        >"$OUT/results.md" 2>"$OUT/benchmark.log"
    status=$?
    log "benchmark exit $status after $(($(date +%s) - start)) s"
    if [[ $status -ne 0 ]]; then
        tail -20 "$OUT/benchmark.log" >&2
        # Whatever models finished are in results.json: render them.
        [[ -s "$OUT/results.json" ]] && "$PY" "$ROOT/benchmarks/gpu_vs_litert.py" \
            --from-json "$OUT/results.json" --markdown >"$OUT/results.md" 2>>"$OUT/benchmark.log"
    fi
fi
# -- the roofline of each model on gpu_opencl (its device's peak, measured by its kernels) --------
if [[ "${ROOFLINE:-1}" != 0 ]]; then
    : >"$OUT/roofline.txt"
    # Started only while the step's budget lasts (the device tool ends a command at 600 s).
    roofline_end=$(($(date +%s) + ${ROOFLINE_BUDGET:-150}))
    for model in "$WORK"/models/*.tflite; do
        if (($(date +%s) >= roofline_end)); then
            log "roofline: budget (${ROOFLINE_BUDGET:-150} s) spent before $(basename "$model")"
            break
        fi
        echo "### $(basename "$model" .tflite)" >>"$OUT/roofline.txt"
        timeout "${ROOFLINE_TIMEOUT:-60}" "$PY" -m offload benchmark --graph "$model" --use_gpu \
            --roofline --num_runs 50 --min_secs 1 >>"$OUT/roofline.txt" 2>>"$OUT/roofline.log" ||
            log "roofline of $(basename "$model"): exit $?"
    done
    log "roofline: $(grep -c '^###' "$OUT/roofline.txt") models in roofline.txt"
fi
[[ -s "$OUT/results.md" ]] && cat "$OUT/results.md"
rm -rf "$WORK"
exit "$status"
