#!/usr/bin/env bash
# Reproduce the shipped model (data/model) end to end with this project's own modules:
#   vocabulary -> ELECTRA pre-training -> synthetic errors -> CSC fine-tuning -> calibration -> evaluation.
#
#   bash scripts/train_default_model.sh                       # the recipe of the shipped model
#   PRESET=small PRETRAIN_STEPS=100000 bash scripts/...       # a bigger run on a GPU
#   INIT=hfl/chinese-electra-180g-small-discriminator bash …  # start from a hub checkpoint (skips pre-training)
#
# Every step is resumable: rerun the script and finished steps are skipped, a pre-training or
# fine-tuning run that was stopped continues from its last checkpoint (--resume).
set -euo pipefail
cd "$(dirname "$0")/.."

SHARED=${CSC_SHARED_DATA:-../shared/data}
RUNS=${RUNS:-runs}
PRESET=${PRESET:-mini}
GENERATOR_SIZE=${GENERATOR_SIZE:-0.5}
PRETRAIN_STEPS=${PRETRAIN_STEPS:-1700}
PRETRAIN_MINUTES=${PRETRAIN_MINUTES:-72}   # CPU time box; remove on a GPU
FINETUNE_STEPS=${FINETUNE_STEPS:-2400}
FINETUNE_MINUTES=${FINETUNE_MINUTES:-40}
SYNTH_SIZE=${SYNTH_SIZE:-60000}
INIT=${INIT:-}
OUT=${OUT:-data/model}

CSC="$SHARED/csc"
REAL_TRAIN=("$CSC/sighan/train2013.tsv" "$CSC/sighan/train2014.tsv" "$CSC/sighan/train2015.tsv"
            "$CSC/ecspell/law.train.tsv" "$CSC/ecspell/med.train.tsv" "$CSC/ecspell/odw.train.tsv")
mkdir -p "$RUNS"

if [ -z "$INIT" ]; then
  [ -f "$RUNS/vocab/vocab.txt" ] || python -m corrector.pretrain vocab --corpus "$SHARED/corpus" --output "$RUNS/vocab"
  python -m corrector.pretrain train --corpus "$SHARED/corpus" --output "$RUNS/pretrain" --vocab "$RUNS/vocab" \
    --preset "$PRESET" --generator-size "$GENERATOR_SIZE" --lr 1e-3 --warmup-steps 100 \
    --max-steps "$PRETRAIN_STEPS" --max-minutes "$PRETRAIN_MINUTES" --save-every 100 --seed 42 --resume
  INIT="$RUNS/pretrain"
  VOCAB="$RUNS/vocab"
else
  VOCAB="$INIT"
fi

[ -f "$RUNS/synth.tsv" ] || python -m corrector.finetune synth --corpus "$SHARED/corpus" --output "$RUNS/synth.tsv" \
  --size "$SYNTH_SIZE" --seed 0 --vocab "$VOCAB"

python -m corrector.finetune train --init "$INIT" --output "$RUNS/finetune" \
  --train "$RUNS/synth.tsv" "${REAL_TRAIN[@]}" --dev-from "${REAL_TRAIN[@]}" --dev-share 0.08 \
  --max-steps "$FINETUNE_STEPS" --max-minutes "$FINETUNE_MINUTES" --lr 5e-4 --warmup-steps 150 --seed 42 --resume

python -m corrector.finetune calibrate --model "$RUNS/finetune" --dev "$RUNS/finetune/dev.tsv"

# Ship: weights (safetensors), tokenizer, scorer.json — no checkpoints.
mkdir -p "$OUT"
cp -r "$RUNS/finetune/discriminator" "$RUNS/finetune/generator" "$OUT/"
cp "$RUNS/finetune/"{vocab.txt,tokenizer.json,tokenizer_config.json,scorer.json} "$OUT/"
cp "$RUNS/finetune/"special_tokens_map.json "$OUT/" 2>/dev/null || true

python -m evaluate "$CSC/sighan/test2013.tsv" "$CSC/sighan/test2014.tsv" "$CSC/sighan/test2015.tsv" \
  "$CSC/ecspell/law.test.tsv" "$CSC/ecspell/med.test.tsv" "$CSC/ecspell/odw.test.tsv" \
  --model "$OUT" --system identity,classic,corrector --json "$RUNS/eval.json" --report "$RUNS/eval.md"
