#!/usr/bin/env bash
# Installs every dependency of tda from Debian and PyPI, builds, and prepares the bundled
# default data. Safe to re-run. Usage: ./scripts/setup.sh   (as root, or with sudo available)
#   ./scripts/setup.sh --data   only the Python packages that scripts/prepare_fineweb_edu.py needs
#                               to download (datasets, with pyarrow) into .venv; nothing else
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = --data ]; then
  # numpy<2: Debian's numpy and torch, seen through --system-site-packages, are numpy 1 builds.
  [ -x .venv/bin/python ] || python3 -m venv --system-site-packages .venv
  .venv/bin/python -m pip install -q --disable-pip-version-check 'datasets>=2.18' \
    'tiktoken>=0.5' 'numpy<2'
  echo "[setup] data tools installed: .venv/bin/python scripts/prepare_fineweb_edu.py --out DIR"
  exit 0
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

APT_PKGS=(build-essential cmake pkg-config git
          nlohmann-json3-dev libspdlog-dev libcxxopts-dev catch2 libopenblas-dev libpcre2-dev
          libopenmpi-dev openmpi-bin
          python3 python3-venv python3-pip python3-numpy python3-matplotlib python3-torch
          clang libclang-rt-14-dev)  # clang + libFuzzer for scripts/fuzz.sh
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[setup] apt-get install ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Python tools (tiktoken for the data script and tokenizer oracle, entmax for its oracle,
# safetensors for loading HF exports; python/tda_hf also reads them without it; rouge-score
# for the SCROLLS metric oracle; transformers for loading exports as lm-eval does: 4.44 is the
# last line that runs on torch 1.13; scipy for scripts/bench/attention_model.py's non-negative
# least squares; tensorboard to view the event files `tda train` writes, and its reader for their
# test: docs/tracking.md. W&B is optional: pip install wandb).
# Debian's CPU torch comes in through --system-site-packages; PyPI's torch is never pulled.
if [ ! -x .venv/bin/python ]; then
  /usr/bin/python3 -m venv --system-site-packages .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check 'tiktoken>=0.5' 'safetensors>=0.4' \
  'rouge-score==0.1.2' 'transformers>=4.40,<4.45' 'scipy>=1.10' 'tensorboard>=2.14'
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps 'entmax>=1.1'
# cuDNN's header-only C++ frontend (include/cudnn_frontend*.h, ~12 MB), for the GPU build's cuDNN
# attention (CMakeLists.txt finds it in .venv; docs/cuda.md). --no-deps: its Python side pulls
# CUTLASS's DSL and TVM, which the headers do not need.
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps 'nvidia-cudnn-frontend>=1.13'
# cuobjdump and the nvdisasm it runs (10 MB; the toolkit under /usr/local/cuda may lack them):
# scripts/bench/sass_tiles.py reads the attention kernels' SASS with them (docs/perf.md).
.venv/bin/python -m pip install -q --disable-pip-version-check 'nvidia-cuda-cuobjdump>=13.0' \
  'nvidia-cuda-nvdisasm>=13.0'

BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"

# The bundled default corpus, tokenized into llm.c shards.
.venv/bin/python scripts/prepare_default_data.py
echo "[setup] done: ./$BUILD_DIR/tda train --config configs/tiny/softmax.json"
