#!/usr/bin/env bash
# The GPU checks docs/scale.md promises, as one run on a CUDA machine (under 8 minutes on
# one H200: every step has its own time limit), each step's output under $OUT:
#   env.txt          nvidia-smi, and torch/CUDA as Python sees them
#   harness_gpu.md   benchmarks/bench_harness.py --gpu: every reference loop ok on cuda,
#                    every device-placement mutant crashes with the device-mismatch error
#   sweep_cuda.log   a device=cuda multirun (51 runs of mlp_digits spread over the GPUs)
#   submitit_cuda.log  the same through submitit_local (gpus_per_node fitted at launch)
#   bench_gpu.md     benchmarks/bench_gpu.py: runs/min per runs_per_gpu, fork and spawn
#   summary.md       each step's exit status and wall time
#
#   bash benchmarks/gpu_checks.sh --wheels   # here, with PyPI: what the device image
#                                            # lacks, as Python 3.12 wheels in .whl/
#   bash benchmarks/gpu_checks.sh            # on the device, .whl/ carried along
#   bash benchmarks/gpu_checks.sh --dry-run  # on a CPU machine: every step, tiny, on CPU
#                                            # (a check of this script, not a measurement)
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
mode="${1:-run}"
# Tested versions; the device image has torch, numpy, pandas, pyarrow, scipy,
# scikit-learn, matplotlib, pyyaml and cloudpickle but not these.
WHEELS=(libcst==1.9.0 orjson==3.13.0 hydra-core==1.3.8 omegaconf==2.3.1 submitit==1.5.4
        hydra-submitit-launcher==1.2.0)
ANTLR=antlr4-python3-runtime==4.9.3  # hydra's parser runtime: an sdist only, built here

if [ "$mode" = "--wheels" ]; then
  mkdir -p .whl
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .whl "${WHEELS[@]}" || exit 1
  python3 -m pip wheel -q --no-deps -w .whl "$ANTLR" || exit 1
  ls -l .whl
  echo "carry .whl to the device: run(command='bash benchmarks/gpu_checks.sh', carry=['.whl'])"
  exit 0
fi

OUT="${OUT:-$ROOT/gpu-checks-out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/gpu-checks-site .whl/*.whl || exit 1
  export PYTHONPATH="/tmp/gpu-checks-site:$ROOT${PYTHONPATH:+:$PYTHONPATH}"
else
  export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
fi

if [ "$mode" = "--dry-run" ]; then
  DEVICE=cpu; HARNESS_LOOPS=mlp_digits
  BENCH=(--device cpu --gpus 0,1 --runs 4 --runs-per-gpu 1 --start-methods fork --epochs 1)
  SWEEP_OPS="mutation.operators=[drop_zero_grad]"
else
  DEVICE=cuda; HARNESS_LOOPS=""
  BENCH=(--runs 32 --runs-per-gpu 8,16 --start-methods fork,spawn)
  SWEEP_OPS="mutation=all"
fi
WORK="$(mktemp -d)"
echo "| step | exit | wall s |" > "$OUT/summary.md"
echo "| --- | --- | --- |" >> "$OUT/summary.md"
failed=0

step() {  # step NAME LIMIT_S OUTPUT_FILE COMMAND...
  local name="$1" limit="$2" file="$3"; shift 3
  local start=$SECONDS
  echo "== $name (limit ${limit}s): $*" | tee "$OUT/$file"
  timeout -k 10 "$limit" "$@" >> "$OUT/$file" 2>&1
  local code=$?
  echo "| $name | $code$([ $code = 124 ] && echo ' (time limit)') | $((SECONDS - start)) |" >> "$OUT/summary.md"
  [ "$code" = 0 ] || failed=1
  tail -n 5 "$OUT/$file"
}

step env 30 env.txt bash -c 'nvidia-smi || echo "no nvidia-smi"; python3 -c "
import torch, sys
print(sys.version.split()[0], \"torch\", torch.__version__, \"CUDA\", torch.version.cuda)
print(\"cuda available:\", torch.cuda.is_available(), \"devices:\", torch.cuda.device_count())
from importlib.metadata import version
print(*(f\"{name} {version(name)}\" for name in (\"libcst\", \"hydra-core\", \"submitit\")))
"'
step harness_gpu 120 harness_gpu.md \
  python3 benchmarks/bench_harness.py --gpu ${HARNESS_LOOPS:+--loops "$HARNESS_LOOPS"}
step sweep_cuda 90 sweep_cuda.log \
  python3 -m experiments.run -m device="$DEVICE" loop=mlp_digits "$SWEEP_OPS" \
  budget.runs_per_gpu=8 results_dir="$WORK/sweep" hydra.sweep.dir="$WORK/multirun"
step submitit_cuda 60 submitit_cuda.log \
  python3 -m experiments.run -m hydra/launcher=submitit_local device="$DEVICE" \
  loop=mlp_digits "mutation.operators=[drop_zero_grad,scale_lr]" shard.count=2 \
  'shard.index=range(2)' results_dir="$WORK/submitit" hydra.sweep.dir="$WORK/multirun_submitit"
step bench_gpu 150 bench_gpu.md python3 benchmarks/bench_gpu.py "${BENCH[@]}"
cat "$OUT/summary.md"
rm -rf "$WORK"
exit "$failed"
