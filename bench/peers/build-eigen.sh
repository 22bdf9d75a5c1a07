#!/usr/bin/env bash
# Builds the Eigen 3.4 peer of `enginetop bench pool` into target/peers/eigen_pool.
#
# Installs libeigen3-dev with apt-get when Eigen's headers are missing (needs root), then
# compiles bench/peers/eigen_pool.cc with g++ -O2. Run from anywhere; paths are relative to
# the repository root.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
eigen_include="${EIGEN_INCLUDE:-/usr/include/eigen3}"
out_dir="${repo_root}/target/peers"

if [[ ! -f "${eigen_include}/unsupported/Eigen/CXX11/ThreadPool" ]]; then
    echo "build-eigen: Eigen headers not found in ${eigen_include}; installing libeigen3-dev" >&2
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libeigen3-dev
fi

mkdir -p "${out_dir}"
g++ -O2 -std=c++17 -pthread -I"${eigen_include}" \
    -o "${out_dir}/eigen_pool" "${repo_root}/bench/peers/eigen_pool.cc"
echo "build-eigen: built ${out_dir}/eigen_pool" >&2
