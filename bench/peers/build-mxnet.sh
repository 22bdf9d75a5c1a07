#!/usr/bin/env bash
# Builds the Apache MXNet 1.9.1 peer of `enginetop bench engine` (and, with --profile, of
# `enginetop bench profiler`'s random_dag) into target/peers/mxnet_engine.
#
# 1. Creates a Python venv in target/peers/mxnet-venv and installs mxnet==1.9.1 from PyPI
#    (with numpy<2, which 1.9.1 requires). The manylinux2014 wheel bundles libmxnet.so,
#    libopenblas.so.0 and libgfortran.so.3, and ships the C API header
#    mxnet/include/mxnet/c_api.h; the only system libraries it needs beyond glibc/libstdc++
#    are libgomp1 and libquadmath0, which are installed with apt-get when missing (root).
# 2. Compiles bench/peers/mxnet_engine.cc with g++ -O2 -std=c++17 against that header, with
#    the library's absolute path baked in (it is dlopen'ed after the MXNET_* variables are
#    set) and an rpath to the wheel's directory, so the binary runs without LD_LIBRARY_PATH.
#
# Idempotent: an installed mxnet 1.9.1 is kept, and the binary is rebuilt only when it is
# older than its source, the shared argument parser (bench_args.h) or this script. Nothing
# is written outside target/peers (and apt's system directories). Environment: PYTHON
# (default python3) picks the interpreter for the venv; FORCE=1 rebuilds the binary.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out_dir="${repo_root}/target/peers"
venv="${out_dir}/mxnet-venv"
source_file="${repo_root}/bench/peers/mxnet_engine.cc"
args_header="${repo_root}/bench/peers/bench_args.h"
binary="${out_dir}/mxnet_engine"
mxnet_version="1.9.1"

mkdir -p "${out_dir}"

if [[ ! -x "${venv}/bin/python" ]]; then
    echo "build-mxnet: creating venv ${venv}" >&2
    "${PYTHON:-python3}" -m venv "${venv}"
fi

site_packages="$("${venv}/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
mxnet_dir="${site_packages}/mxnet"
installed="$("${venv}/bin/python" -c '
import importlib.metadata as m
try:
    print(m.version("mxnet"))
except m.PackageNotFoundError:
    print("")
')"
if [[ "${installed}" != "${mxnet_version}" || ! -f "${mxnet_dir}/libmxnet.so" ]]; then
    echo "build-mxnet: installing mxnet==${mxnet_version} into ${venv}" >&2
    "${venv}/bin/python" -m pip install --disable-pip-version-check --quiet \
        "mxnet==${mxnet_version}" "numpy<2"
fi

if [[ ! -f "${mxnet_dir}/libmxnet.so" || ! -f "${mxnet_dir}/include/mxnet/c_api.h" ]]; then
    echo "build-mxnet: libmxnet.so or include/mxnet/c_api.h missing in ${mxnet_dir}" >&2
    exit 1
fi

# System libraries the wheel's bundled libraries need (libgomp for libmxnet, libquadmath for
# the bundled libgfortran.so.3).
missing="$(ldd "${mxnet_dir}/libmxnet.so" "${mxnet_dir}/libgfortran.so.3" 2>/dev/null |
    awk '/not found/ {print $1}' | sort -u)"
if [[ -n "${missing}" ]]; then
    echo "build-mxnet: missing system libraries: ${missing//$'\n'/ }; installing with apt-get" >&2
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libgomp1 libquadmath0
    still="$(ldd "${mxnet_dir}/libmxnet.so" | awk '/not found/ {print $1}')"
    if [[ -n "${still}" ]]; then
        echo "build-mxnet: libmxnet.so still lacks: ${still}" >&2
        exit 1
    fi
fi

if [[ "${FORCE:-0}" == 1 || ! -x "${binary}" || "${binary}" -ot "${source_file}" ||
      "${binary}" -ot "${args_header}" || "${binary}" -ot "${BASH_SOURCE[0]}" ]]; then
    # Not linked with -lmxnet: libmxnet.so reads MXNET_CPU_WORKER_NTHREADS in a static
    # initializer as it loads, so the binary sets MXNET_* first and then dlopens this path.
    g++ -O2 -std=c++17 -pthread -I"${mxnet_dir}/include" \
        -DMXNET_LIBRARY="\"${mxnet_dir}/libmxnet.so\"" \
        -o "${binary}" "${source_file}" -ldl -Wl,-rpath,"${mxnet_dir}"
    echo "build-mxnet: built ${binary} against ${mxnet_dir}/libmxnet.so" >&2
else
    echo "build-mxnet: ${binary} is up to date" >&2
fi
