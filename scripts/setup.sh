#!/usr/bin/env bash
# Installs trainwreck (editable) into the current Python environment.
# - If torch is missing, installs the CPU build first (torch==2.13.0), so the
#   project's plain `torch` requirement never pulls a multi-GB CUDA build.
# - A torch that is already installed (CPU or CUDA) is left as it is.
# Usage: bash scripts/setup.sh [--dev]      (--dev adds pytest and ruff)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
extras=""
for arg in "$@"; do
  case "$arg" in
    --dev) extras="[dev]" ;;
    *) echo "setup.sh: unknown option '$arg' (expected --dev)" >&2; exit 2 ;;
  esac
done
pip_install() { "$PY" -m pip install --disable-pip-version-check -q "$@"; }
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  echo "setup: no torch found; installing the CPU build torch==2.13.0"
  pip_install "torch==2.13.0" || pip_install "torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu
fi
pip_install -e ".${extras}"
# The HTML report test drives headless Chromium; install it where we can (Debian, as root).
if [ -n "$extras" ] && ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 \
   && [ "$(id -u)" = 0 ]; then
  echo "setup: installing chromium for the report test (apt-get)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >/dev/null 2>&1 \
    || echo "setup: could not install chromium; the report's browser test will be skipped"
fi
command -v pyenv >/dev/null 2>&1 && pyenv rehash >/dev/null 2>&1 || true
"$PY" -c "import torch, libcst, hydra, pandas; from importlib.metadata import version; print(f'setup: ok (torch {torch.__version__}, libcst {version(\"libcst\")}, hydra-core {version(\"hydra-core\")})')"
