#!/usr/bin/env bash
# Both engines on a machine with a GPU: a real judge (judge: and implicit:) and a real classifier RM
# (classifier:), HF in process against vLLM through its server, on the same pairs: agreement and throughput.
#
#   bash bench/gpu_check.sh                         # defaults below; needs the network once for the weights
#   JUDGE=Qwen/Qwen2.5-7B-Instruct CLASSIFIER=Skywork/Skywork-Reward-V2-Llama-3.1-8B bash bench/gpu_check.sh
#
# vLLM for GPUs (the `vllm` package, not the CPU build) goes into its own venv, .venv-vllm-gpu, unless
# PRB_VLLM_PYTHON already names a Python that has it. Results: gpu_check/*.json and gpu_check/*.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

JUDGE=${JUDGE:-Qwen/Qwen2.5-1.5B-Instruct}
CLASSIFIER=${CLASSIFIER:-Skywork/Skywork-Reward-V2-Qwen3-0.6B}
DATA=${DATA:-sample}
PROFILES=${PROFILES:-"none top3 full"}
PY=${PY:-.venv/bin/python}
OUT=${OUT:-gpu_check}
mkdir -p "$OUT"

if [ -z "${PRB_VLLM_PYTHON:-}" ]; then
  if [ ! -x .venv-vllm-gpu/bin/python ]; then
    python3 -m venv .venv-vllm-gpu
    .venv-vllm-gpu/bin/python -m pip install --quiet vllm
  fi
  export PRB_VLLM_PYTHON=.venv-vllm-gpu/bin/python
fi
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
"$PRB_VLLM_PYTHON" -c "import vllm; print('vllm', vllm.__version__)" | tee -a "$OUT/gpu.txt"

profile_args=()
for p in $PROFILES; do profile_args+=(--profile "$p"); done

# judge: and implicit: (agreement + pairs/s, float32 on both engines)
"$PY" bench/engine_throughput.py --data "$DATA" --model "$JUDGE" "${profile_args[@]}" --device cuda \
  --json "$OUT/judge.json" | tee "$OUT/judge.txt"
# classifier: (agreement + pairs/s)
"$PY" bench/engine_throughput.py --data "$DATA" --model "$CLASSIFIER" --kind classifier "${profile_args[@]}" \
  --device cuda --json "$OUT/classifier.json" | tee "$OUT/classifier.txt"
echo "Numbers in $OUT/"
