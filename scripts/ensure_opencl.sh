#!/usr/bin/env sh
# Gives the OpenCL tests a device that can compile kernels, or says why they will skip.
#
# The PoCL that pip installs (pocl-binary-distribution) is built on LLVM 14, which does not
# know processors newer than it (AMD Zen 5, for one): every kernel build then fails with
# "unknown target CPU 'generic'". Debian's PoCL picks its target from the CPU's features
# instead, so on a Debian machine where we are root it is installed beside the pip one; the
# delegate skips devices whose compiler fails. Elsewhere nothing is installed.
#
# OFFLOAD_DEBIAN_POCL=1 (.ci/run sets it) installs Debian's PoCL even where pip's works: the
# OpenCL tests then run on both drivers (tests/opencl/test_drivers.py), so CI covers the one
# this script gives users too. An install that cannot happen (not root, no apt-get, no network
# to the Debian mirrors) is a warning, never a failure: the tests run on what is there.
set -eu
python="$1"

reason() {
    "$python" -c 'import offload_gpu_opencl as g; print(g.GpuOpenCLDelegate.availability().reason)'
}

# Installs Debian's PoCL; says why not and returns 1 when it cannot.
install_debian_pocl() {
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "warning: Debian's PoCL (pocl-opencl-icd) not installed: that needs root and apt-get"
        return 1
    fi
    echo "installing Debian's PoCL (pocl-opencl-icd)"
    if apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends pocl-opencl-icd >/dev/null; then
        return 0
    fi
    echo "warning: installing Debian's PoCL (pocl-opencl-icd) failed; see apt-get's message above"
    return 1
}

if [ "${OFFLOAD_DEBIAN_POCL:-}" = 1 ] &&
    ! dpkg-query -W -f='${Status}' pocl-opencl-icd 2>/dev/null | grep -q "ok installed"; then
    install_debian_pocl || echo "warning: the OpenCL tests will run on one driver only"
fi

why="$(reason)"
[ -z "$why" ] && exit 0
echo "gpu_opencl is unavailable: $why"
if install_debian_pocl; then
    why="$(reason)"
    [ -z "$why" ] && exit 0
    echo "gpu_opencl is still unavailable: $why"
fi
echo "warning: the OpenCL tests will be skipped; install an OpenCL driver (Debian: pocl-opencl-icd)"
