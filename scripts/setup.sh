#!/usr/bin/env bash
# Installs what hybridgen needs to build and test. Idempotent: installs only what is missing.
set -euo pipefail

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libdnnl-dev libnuma-dev numactl libcli11-dev libspdlog-dev libfmt-dev libyaml-cpp-dev
  nlohmann-json3-dev libpcre2-dev libutf8proc-dev libgtest-dev libgmock-dev libbenchmark-dev
  python3-numpy python3-matplotlib clang libclang-rt-14-dev ccache libeigen3-dev
  slurm-wlm munge
)

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

# The test tools run under whatever python3 is first on PATH (a pyenv one, say), which does
# not see Debian's python3-numpy: give that interpreter numpy from PyPI if it lacks it.
PY=${PYTHON:-python3}
if ! "$PY" -c "import numpy" 2>/dev/null; then
  echo "setup: installing numpy for $PY"
  "$PY" -m pip install -q "numpy>=1.24,<3"
fi
