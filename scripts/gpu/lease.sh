#!/usr/bin/env bash
# One prepared GPU lease (docs/gpu.md, "Lease script"), in one device call:
#   bench     `pretrain bench --ours-only` at the shipped width (3 x 256) and 12 x 768, eager, then 12 x 768
#             compiled: tokens/s and MFU (~1-2 min with the compilation)
#   pretrain  continued RTD pre-training of the pair (INIT, default data/model's networks) on the corpus's
#             tokens: a PT_STEPS-step schedule spread over as many leases as it takes, resumed from the last
#             lease's checkpoint, --compile, a checkpoint every CKPT_S seconds
#   finetune  once pre-training has reached PT_STEPS: the recipe's fine-tune from it (FT_STEPS, resumed alike)
#   pack      into $OUT: logs.tar (logs, metrics, bench JSON, summary.txt), state.tar.xz.part-* (the run,
#             for the next lease), finetuned.tar.part-* (the fine-tuned pair, release layout, fp16)
# Each stage gets what is left of BUDGET_S (pre-training at most PT_SHARE of it) as --max-minutes, and a
# hard `timeout` one minute later; a stage whose inputs did not travel is skipped.
#
#   bash scripts/gpu/lease.sh prepare          on the CPU: the inputs into $IN (tokens, fine-tuning pairs)
#   bash scripts/gpu/lease.sh                  on the device (or DEVICE=cpu TINY=1: a dry run of every stage)
#   bash scripts/gpu/lease.sh unpack FILES_AT  on the CPU: the state into $STATE for the next trip, the pair
#                                              into runs/lease/finetuned, logs into runs/lease/logs
# Inputs ($IN, default .gpu/lease-in, git-ignored): tokens.npy.xz ($BROAD/corpus and corpus_domains, the
# broad dev left out, in data/model's vocabulary, at most ROWS_PER_DOMAIN sequences a domain), ft/synth*.tsv.xz
# (`finetune synth` on the same text), ft/train.tar.xz (real pairs).
# Env: BROAD (runs/broad, for prepare) DEVICE (cuda) TINY (0) IN RUN (/tmp/lease-run) STATE (.gpu/lease/state.tar.xz) INIT (data/model)
#      BUDGET_S (480) PT_SHARE (0.6) PT_STEPS (6000) FT_STEPS (9500) BATCH (256) FT_BATCH (256) PT_LR (2e-4)
#      FT_LR (3e-4) REAL_TIMES (3) CKPT_S (120) COMPILE (1 on cuda) BENCH (1) EXTRA_PT EXTRA_FT STAGES
#      SYNTH_FLAGS (more `finetune synth` flags for prepare's draw; the shape: scripts/synth_draw.sh)
#      SYNTH_CORPUS (the text prepare draws from; default the tokens' text. On the CPU, 1,500 x 64 continuations
#      held out 0.5689 from all the text, 0.5771 from $BROAD/corpus alone: docs/history.md)
set -uo pipefail
DATA=${DATA:-.gpu}
source "$(dirname "$0")/common.sh"
export PYTHONUNBUFFERED=1 TQDM_MININTERVAL=${TQDM_MININTERVAL:-30}
PY=${PY:-python3}
DEVICE=${DEVICE:-cuda}; TINY=${TINY:-0}; IN=${IN:-$DATA/lease-in}; RUN=${RUN:-/tmp/lease-run}
STATE=${STATE:-$DATA/lease/state.tar.xz}; INIT=${INIT:-data/model}; OUT=${OUT:-runs/lease-out}
BUDGET_S=${BUDGET_S:-480}; PT_SHARE=${PT_SHARE:-0.6}; CKPT_S=${CKPT_S:-120}; REAL_TIMES=${REAL_TIMES:-3}
PT_STEPS=${PT_STEPS:-6000}; FT_STEPS=${FT_STEPS:-9500}; BATCH=${BATCH:-256}; FT_BATCH=${FT_BATCH:-256}
PT_LR=${PT_LR:-2e-4}; FT_LR=${FT_LR:-3e-4}; LOG_EVERY=${LOG_EVERY:-100}; STAGES=${STAGES:-bench pretrain finetune}
COMPILE=${COMPILE:-$([ "$DEVICE" = cuda ] && echo 1 || echo 0)}
PT_MODEL=(--init "$INIT"); BENCH_ARGS=(--batch-size "$BATCH" --steps 20); PRESETS="shipped base"
if [ "$TINY" = 1 ]; then  # a dry run: tiny networks, a few steps, inputs from tests/fixtures
  PT_MODEL=(--preset tiny --vocab data/model --max-length 32); PT_STEPS=${PT_STEPS_TINY:-8}; FT_STEPS=6
  BATCH=8; FT_BATCH=8; LOG_EVERY=2; BENCH_ARGS=(--batch-size 4 --max-length 32 --steps 2); PRESETS=tiny
  IN=${TINY_IN:-/tmp/lease-tiny-in}
fi
[ "$DEVICE" = cpu ] && CPU=(--cpu) || CPU=()
[ "$COMPILE" = 1 ] && COMPILED=(--compile) || COMPILED=()
START=$(date +%s)
left() { echo $((BUDGET_S - ($(date +%s) - START))); }
latest_step() { [ -f "$1/checkpoints/latest" ] && { local s; s=$(cat "$1/checkpoints/latest"); echo $((10#${s#step-})); } || echo 0; }
has_stage() { [[ " $STAGES " == *" $1 "* ]]; }

tiny_inputs() {  # the correct sides of tests/fixtures/pairs.tsv as a corpus, its pairs as fine-tuning data
  mkdir -p "$IN/ft/train"
  [ -f "$IN/tokens.npy.xz" ] || "$PY" - "$IN" <<'PYEOF' || exit 1
import sys, numpy as np
from transformers import AutoTokenizer
from corrector.pretrain.corpus import CorpusStats, pack_sequences
from corrector.text.tokenization import CharTokenizer
tokenizer = CharTokenizer(AutoTokenizer.from_pretrained("data/model"))
lines = [line.split("\t")[-1].strip() for line in open("tests/fixtures/pairs.tsv", encoding="utf-8")] * 40
rows = list(pack_sequences(lines, tokenizer, 32, CorpusStats()))
array = np.full((len(rows), 32), tokenizer.pad_token_id, dtype=np.uint16)
for i, row in enumerate(rows):
    array[i, : len(row)] = row
np.save(sys.argv[1] + "/tokens.npy", array)
PYEOF
  [ -f "$IN/tokens.npy.xz" ] || xz -f "$IN/tokens.npy"
  cp tests/fixtures/pairs.tsv "$IN/ft/train/fixtures.tsv"
  xz -c tests/fixtures/pairs.tsv > "$IN/ft/synth.tsv.xz"
  tar cJf "$IN/ft/train.tar.xz" -C "$IN/ft/train" .
}

prepare() {  # on the CPU: tokens of all the text in data/model's vocabulary (capped per domain), one synthetic draw, real pairs
  local broad=${BROAD:-runs/broad}  # the broad dev the release is calibrated on: its text stays out
  local corpus=(${CORPUS:-$broad/corpus $broad/corpus_domains})
  mkdir -p "$IN/ft"
  # 12,000 sequences of 128 a domain (13 domains): 153 k sequences, 19.6 M tokens, 13 MB compressed, which a later
  # lease carries beside a 47 MB state (all 140 M characters: ~105 MB; 40,000 a domain: 35 MB).
  [ -f "$IN/tokens.npy.xz" ] || { "$PY" - "$IN" "${ROWS_PER_DOMAIN:-12000}" "${corpus[@]}" <<'PYEOF' && xz -T2 -6 "$IN/tokens.npy"; } || exit 1
import sys, numpy as np
from transformers import AutoTokenizer
from corrector.pretrain.corpus import sample_by_domain
from corrector.text.tokenization import CharTokenizer
tokenizer = CharTokenizer(AutoTokenizer.from_pretrained("data/model"))
np.save(sys.argv[1] + "/tokens.npy", sample_by_domain(sys.argv[3:], tokenizer, "runs/lease-cache", int(sys.argv[2]), 128))
PYEOF
  local train=("$broad"/train/*.tsv)
  [ -f "$IN/ft/train.tar.xz" ] || tar cJf "$IN/ft/train.tar.xz" -C "$broad/train" .
  source "$(dirname "$0")/../synth_draw.sh"  # the recipe's kind of draw, from the tokens' text unless SYNTH_CORPUS
  local synth_corpus=(${SYNTH_CORPUS:-${corpus[@]}})
  [ -f "$IN/ft/synth.tsv.xz" ] || { "$PY" -m corrector.finetune synth --corpus "${synth_corpus[@]}" --output /tmp/lease-synth.tsv \
    --size "${FT_SIZE:-400000}" --seed "${SYNTH_SEED:-1}" --vocab data/model --error-model "${train[@]}" \
    --exclude "$broad/dev.tsv" "${SYNTH_DRAW_FLAGS[@]}" ${SYNTH_FLAGS:-} \
    && xz -T2 -c /tmp/lease-synth.tsv > "$IN/ft/synth.tsv.xz"; } || exit 1
  du -sh "$IN"/* "$IN"/ft/*
}

unpack() {  # FILES_AT: what came back, into the places the CPU steps and the next trip read
  local from=$1
  mkdir -p "$(dirname "$STATE")" runs/lease/logs
  if compgen -G "$from/state.tar.xz.part-*" > /dev/null; then cat "$from"/state.tar.xz.part-* > "$STATE"; fi
  if compgen -G "$from/finetuned.tar.part-*" > /dev/null; then
    rm -rf runs/lease/finetuned && cat "$from"/finetuned.tar.part-* | tar xf - -C runs/lease
  fi
  [ -f "$from/logs.tar" ] && tar xf "$from/logs.tar" -C runs/lease/logs
  cat runs/lease/logs/summary.txt 2>/dev/null
  echo "next trip: carry $(dirname "$STATE") ($(du -sh "$STATE" 2>/dev/null | cut -f1)); calibrate: NETWORKS=runs/lease/finetuned bash scripts/train_default_model.sh"
}

case "${1:-run}" in
  prepare) prepare; exit 0 ;;
  unpack) unpack "${2:?FILES_AT}"; exit 0 ;;
esac

# --- the lease ------------------------------------------------------------------------------
LOGS=/tmp/lease-logs; rm -rf "$LOGS"; mkdir -p "$LOGS" "$OUT"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null || echo "device: $DEVICE"
[ "$TINY" = 1 ] && tiny_inputs
if [ "$(latest_step "$RUN/pt")" = 0 ] && [ "$(latest_step "$RUN/ft")" = 0 ] && [ -f "$STATE" ]; then
  mkdir -p "$RUN" && xz -dc "$STATE" | tar xf - -C "$RUN" || exit 1   # the last lease's run (a warm machine keeps its own)
fi
for stage in pt ft; do  # the pairs did not travel: written again from the checkpoints' fp32 weights
  [ -d "$RUN/$stage/checkpoints" ] && [ ! -f "$RUN/$stage/discriminator/model.safetensors" ] \
    && "$PY" -m corrector.pretrain.lease restore "$RUN/$stage"
done

if has_stage bench && [ "${BENCH:-1}" = 1 ]; then
  for preset in $PRESETS; do
    timeout 120 "$PY" -m corrector.pretrain bench --device "$DEVICE" --preset "$preset" "${BENCH_ARGS[@]}" --ours-only \
      --json "$LOGS/bench-$preset.json" || echo "bench $preset: failed or timed out"
  done
  [ "$COMPILE" = 1 ] && { timeout 180 "$PY" -m corrector.pretrain bench --device "$DEVICE" --preset base "${BENCH_ARGS[@]}" \
    --ours-only --compile --json "$LOGS/bench-base-compiled.json" || echo "bench base --compile: failed or timed out"; }
fi

run_stage() {  # NAME SECONDS COMMAND...: the trainer with --max-minutes, a hard stop a minute later
  local name=$1 seconds=$2; shift 2
  [ "$seconds" -ge 30 ] || { echo "$name: $seconds s left, skipped"; return 1; }
  echo "$name: up to $seconds s"
  timeout -s INT $((seconds + 60)) "$@" --max-minutes "$(awk "BEGIN{print $seconds / 60}")" \
    --checkpoint-every-s "$CKPT_S" --save-every 100000000 --log-every "$LOG_EVERY" --resume "${CPU[@]}" "${COMPILED[@]}" \
    > "$LOGS/$name.log" 2>&1
  local status=$?
  tail -3 "$LOGS/$name.log"
  return $status
}

if has_stage pretrain && [ ! -f "$RUN/pt/DONE" ]; then
  if [ -f "$IN/tokens.npy.xz" ]; then
    unpack_xz "$IN/tokens.npy.xz" /tmp/lease-tokens.npy
    [ -f "$RUN/pt/discriminator/model.safetensors" ] && PT_MODEL=(--init "$RUN/pt" $([ "$TINY" = 1 ] && echo --max-length 32))
    seconds=$(awk "BEGIN{print int($(left) * $PT_SHARE)}")
    run_stage pretrain "$seconds" "$PY" -m corrector.pretrain train --corpus /tmp/lease-tokens.npy "${PT_MODEL[@]}" \
      --output "$RUN/pt" --max-steps "$PT_STEPS" --warmup-steps $((PT_STEPS / 20)) --batch-size "$BATCH" --lr "$PT_LR" \
      ${EXTRA_PT:-}
    [ "$(latest_step "$RUN/pt")" -ge "$PT_STEPS" ] && touch "$RUN/pt/DONE"
  else
    echo "pretrain: no $IN/tokens.npy.xz (carry $IN), skipped"
  fi
fi

if has_stage finetune && [ -f "$RUN/pt/DONE" ]; then
  synth=("$IN"/ft/synth*.tsv.xz)
  if [ -f "${synth[0]}" ] && [ -f "$IN/ft/train.tar.xz" ]; then
    mkdir -p /tmp/lease-ft/train && tar xJf "$IN/ft/train.tar.xz" -C /tmp/lease-ft/train
    train=(); for set in "${synth[@]}"; do unpack_xz "$set" "/tmp/lease-ft/$(basename "$set" .xz)"; train+=("/tmp/lease-ft/$(basename "$set" .xz)"); done
    for _ in $(seq "$REAL_TIMES"); do train+=(/tmp/lease-ft/train/*.tsv); done
    ft_init=$RUN/pt; [ -f "$RUN/ft/discriminator/model.safetensors" ] && ft_init=$RUN/ft
    run_stage finetune "$(left)" "$PY" -m corrector.finetune train --init "$ft_init" --output "$RUN/ft" --train "${train[@]}" \
      --batch-size "$FT_BATCH" --generator-input source --seed 42 --error-weight 10 --lr "$FT_LR" --max-steps "$FT_STEPS" \
      --warmup-steps $((FT_STEPS / 10)) ${EXTRA_FT:-}
    [ "$(latest_step "$RUN/ft")" -ge "$FT_STEPS" ] && touch "$RUN/ft/DONE"
  else
    echo "finetune: no $IN/ft/synth*.tsv.xz or $IN/ft/train.tar.xz (carry $IN/ft), skipped"
  fi
fi

# --- pack -----------------------------------------------------------------------------------
{
  echo "lease $(date -u +%FT%TZ) device=$DEVICE tiny=$TINY compile=$COMPILE wall=$(( $(date +%s) - START )) s"
  for stage in pt ft; do
    [ -f "$RUN/$stage/metrics.jsonl" ] || continue
    echo "$stage: step $(latest_step "$RUN/$stage") of $([ $stage = pt ] && echo "$PT_STEPS" || echo "$FT_STEPS")$([ -f "$RUN/$stage/DONE" ] && echo ', done')"
    show_metrics "$RUN/$stage" tokens_per_s tflops mfu mlm_loss disc_loss gen_loss det_recall | tail -3
    cp "$RUN/$stage/metrics.jsonl" "$LOGS/$stage-metrics.jsonl"
  done
  for json in "$LOGS"/bench-*.json; do
    [ -f "$json" ] && "$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[1].split('/')[-1], r['ours_tokens_per_s'], r['ours_achieved_tflops'], r['mfu'])" "$json"
  done
} | tee "$LOGS/summary.txt"
# The checkpoint of the latest stage travels (moments in bf16, corrector/pretrain/lease.py); the saved pairs do
# not (rebuilt from it next time), nor the token cache. An earlier stage keeps its logs and DONE mark only.
keep=pt; [ "$(latest_step "$RUN/ft")" -gt 0 ] && keep=ft
skip=(--exclude='*/model.safetensors' --exclude='*/cache' --exclude='*/ranks' --exclude='.train.lock')
[ $keep = ft ] && skip+=(--exclude='pt/checkpoints')
if [ "$(latest_step "$RUN/$keep")" -gt 0 ]; then
  "$PY" -m corrector.pretrain.lease shrink "$RUN/$keep"
  tar cf - "${skip[@]}" -C "$RUN" . | xz -T0 -1 | split -b 15M - "$OUT/state.tar.xz.part-"
fi
[ -f "$RUN/ft/discriminator/model.safetensors" ] && pack_model "$RUN/ft" finetuned finetune_config.json metrics.jsonl
tar cf "$OUT/logs.tar" -C "$LOGS" .
ls -la "$OUT"
