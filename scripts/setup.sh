#!/usr/bin/env bash
# Installs everything a fresh machine needs to build and test roformer: Debian packages
# (compilers' libraries, ccache, Ninja) and the project's .venv/ with torch==2.11.0 (used
# as LibTorch), matplotlib and transformers. Idempotent: a second run checks and exits fast.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib/preamble.sh"
venv="$root/.venv"
torch_version="2.11.0"
python_bin="${PYTHON:-python3}"

apt_packages=(
  build-essential cmake ninja-build ccache git pkg-config
  libyaml-cpp-dev libspdlog-dev libfmt-dev libcli11-dev nlohmann-json3-dev
  libsentencepiece-dev sentencepiece zlib1g-dev dpkg-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang clang-format libclang-rt-14-dev
  libgloo-dev
)
pip_packages=("torch==${torch_version}" matplotlib transformers tokenizers tensorboard safetensors numpy pyyaml)

say() { printf '[setup] %s\n' "$*"; }

# --- Debian packages ---------------------------------------------------------------
missing=()
for p in "${apt_packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  sudo_cmd=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo_cmd="sudo"
  fi
  say "installing Debian packages: ${missing[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
else
  say "Debian packages: all ${#apt_packages[@]} present"
fi

# --- CUDA toolkit (optional: needed to compile the CUDA kernels) ----------------------
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  nvcc_bin="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
  say "CUDA toolkit: $("$nvcc_bin" --version | grep -o 'release [0-9.]*')"
else
  say "CUDA toolkit: not found (nvcc); the build will be CPU-only (ROFORMER_CUDA=AUTO)"
fi

# --- Python venv with torch (LibTorch), matplotlib, transformers ----------------------
if [ ! -x "$venv/bin/python" ]; then
  say "creating $venv"
  "$python_bin" -m venv "$venv"
fi
have_all=1
for spec in "${pip_packages[@]}"; do
  name="${spec%%==*}"
  want="${spec#*==}"
  got="$("$venv/bin/python" -c "import importlib.metadata as m; print(m.version('$name'))" 2>/dev/null || true)"
  if [ -z "$got" ] || { [ "$want" != "$spec" ] && [ "$got" != "$want" ]; }; then
    have_all=0
  fi
done
if ((have_all)); then
  say "venv packages: all present"
else
  say "installing into $venv: ${pip_packages[*]} (torch is large; first run takes minutes)"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "${pip_packages[@]}"
fi

torch_info="$("$venv/bin/python" -c 'import torch, torch.utils; print(torch.__version__, torch.version.cuda, torch.utils.cmake_prefix_path)')"
read -r tv tc tp <<<"$torch_info"
say "LibTorch: torch $tv (CUDA $tc) at $tp"
say "done"
