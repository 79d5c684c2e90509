#!/usr/bin/env sh
# Gives the OpenCL tests a device that can compile kernels, or says why they will skip.
#
# The PoCL that pip installs (pocl-binary-distribution) is built on LLVM 14, which does not
# know processors newer than it (AMD Zen 5, for one): every kernel build then fails with
# "unknown target CPU 'generic'". Debian's PoCL picks its target from the CPU's features
# instead, so on a Debian machine where we are root it is installed beside the pip one; the
# delegate skips devices whose compiler fails. Elsewhere nothing is installed.
set -eu
python="$1"

reason() {
    "$python" -c 'import offload_gpu_opencl as g; print(g.GpuOpenCLDelegate.availability().reason)'
}

why="$(reason)"
[ -z "$why" ] && exit 0
echo "gpu_opencl is unavailable: $why"
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Debian's PoCL (pocl-opencl-icd)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        pocl-opencl-icd >/dev/null
    why="$(reason)"
    [ -z "$why" ] && exit 0
    echo "gpu_opencl is still unavailable: $why"
fi
echo "warning: the OpenCL tests will be skipped; install an OpenCL driver (Debian: pocl-opencl-icd)"
