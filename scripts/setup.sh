#!/usr/bin/env bash
# Installs what hybridgen needs to build and test. Idempotent: installs only what is missing.
#   scripts/setup.sh               everything: the build, the tests, the sanitizers, plots, Slurm
#   scripts/setup.sh --build-only  what configuring and building hybridgen needs (`make run`)
set -euo pipefail

# CMake finds GoogleTest and Google Benchmark at configure time, so the build needs their headers.
BUILD_PACKAGES=(
  build-essential cmake ninja-build pkg-config git ccache
  libdnnl-dev libnuma-dev numactl libcli11-dev libspdlog-dev libfmt-dev libyaml-cpp-dev
  nlohmann-json3-dev libcpp-httplib-dev libboost-context-dev libpcre2-dev libutf8proc-dev libeigen3-dev libgtest-dev libbenchmark-dev
)
# The tests' references (numpy), sweep plots (matplotlib), the sanitizer and fuzz builds (clang),
# the one-node Slurm cluster of the cluster test, and the function-length check's parser
# (scripts/check_function_length.py runs universal-ctags).
TEST_PACKAGES=(
  libgmock-dev python3-numpy python3-matplotlib clang libclang-rt-14-dev slurm-wlm munge universal-ctags
)
case "${1:-}" in
  --build-only) APT_PACKAGES=("${BUILD_PACKAGES[@]}") ;;
  "") APT_PACKAGES=("${BUILD_PACKAGES[@]}" "${TEST_PACKAGES[@]}") ;;
  *) echo "usage: scripts/setup.sh [--build-only]" >&2; exit 2 ;;
esac

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  # slurm-wlm and munge are for tests/e2e/test_sweep_slurm.cpp, which starts its own one-node
  # cluster (scripts/slurm_local.sh: its own munge key and socket, its own ports). On a machine
  # run by systemd, installing them would leave a munged running that nothing here uses (slurmd and
  # slurmctld do not start: their units need /etc/slurm/slurm.conf, which the packages do not
  # ship); stop the one we just installed. In a container without systemd nothing starts.
  if [[ " ${missing[*]} " == *" munge "* ]] && [ -d /run/systemd/system ]; then
    $SUDO systemctl disable --now munge.service >/dev/null 2>&1 || true
  fi
fi

[[ "${1:-}" == --build-only ]] && exit 0

# The test tools run under whatever python3 is first on PATH (a pyenv one, say), which does
# not see Debian's python3-numpy: give that interpreter numpy from PyPI if it lacks it.
PY=${PYTHON:-python3}
if ! "$PY" -c "import numpy" 2>/dev/null; then
  echo "setup: installing numpy for $PY"
  "$PY" -m pip install -q "numpy>=1.24,<3"
fi
# The official OpenAI client: the server's tests (tests/e2e/test_serve.py) speak to it as users' tools do.
if [ "$("$PY" -m pip show openai 2>/dev/null | sed -n 's/^Version: //p')" != 3.63.0 ]; then
  echo "setup: installing openai 3.63.0 for $PY"
  "$PY" -m pip install -q "openai==3.63.0"
fi
# The gguf package (llama.cpp's gguf-py): the independent oracle for the GGUF block formats
# (tools/gguf_quants.py, tests/unit/test_quant_types.cpp) and the dequantizer of the numpy
# reference for real GGUF models (tools/reference.py). Pinned: its dequantizers are the oracle.
if ! "$PY" -c "import gguf, sys; sys.exit(gguf.__version__ != '0.19.0' if hasattr(gguf, '__version__') else 0)" 2>/dev/null \
   || [ "$("$PY" -m pip show gguf 2>/dev/null | sed -n 's/^Version: //p')" != 0.19.0 ]; then
  echo "setup: installing gguf 0.19.0 for $PY"
  "$PY" -m pip install -q "gguf==0.19.0"
fi
