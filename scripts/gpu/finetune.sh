#!/usr/bin/env bash
# GPU fine-tuning driver (see docs/gpu.md): INIT pair -> probe the step rate on the real sets (or
# take STEPS) -> fine-tune on synthetic + real pairs (real ones REAL_TIMES times) for BUDGET
# seconds -> pack the fp16 pair + dev.tsv + logs as tar pieces into $OUT/NAME.tar.part-*
#
# Inputs under DATA (default .gpu, git-ignored): $DATA/ft/synth.tsv.xz (`finetune synth`) and the
# six real training sets $DATA/ft/{train2013,train2014,train2015,law.train,med.train,odw.train}.tsv
# Env: INIT NAME BUDGET GUARD BATCH LR MODE REAL_TIMES STEPS EXTRA_FT (e.g. --error-weight 10)
set -uo pipefail
DATA=${DATA:-.gpu}
export PYTHONUNBUFFERED=1 TQDM_MININTERVAL=${TQDM_MININTERVAL:-30}
PY=${PY:-python3}
INIT=${INIT:?}; NAME=${NAME:?}; BUDGET=${BUDGET:-400}; GUARD=${GUARD:-7}; BATCH=${BATCH:-128}; LR=${LR:-2e-4}
MODE=${MODE:-source}; PROBE=${PROBE:-60}; PACK=${PACK:-1}
LOGS=${LOGS:-$OUT}; mkdir -p "$LOGS"
FT=$DATA/ft
REAL=($FT/train2013.tsv $FT/train2014.tsv $FT/train2015.tsv $FT/law.train.tsv $FT/med.train.tsv $FT/odw.train.tsv)
[ -f /tmp/synth.tsv ] || { xz -dc $FT/synth.tsv.xz > /tmp/synth.tsv.tmp && mv /tmp/synth.tsv.tmp /tmp/synth.tsv; }
COMMON=(--init "$INIT" --dev-from "${REAL[@]}" --dev-share 0.08 --batch-size "$BATCH" --generator-input "$MODE" --seed 42 --save-every 1000000)
if [ -z "${STEPS:-}" ]; then
rm -rf /tmp/$NAME-probe
$PY -m corrector.finetune train "${COMMON[@]}" --train "${REAL[@]}" --output /tmp/$NAME-probe --max-steps "$PROBE" --warmup-steps 10 --log-every 20 \
  > "$LOGS/$NAME-probe.log" 2>&1 || { tail -30 "$LOGS/$NAME-probe.log"; exit 1; }
RATE=$($PY -c "import json; r=[json.loads(l) for l in open('/tmp/$NAME-probe/metrics.jsonl')]; r=r[1:] or r; print(sum(x['tokens_per_s'] for x in r)/len(r))")
TOKENS=$($PY -c "import json; r=[json.loads(l) for l in open('/tmp/$NAME-probe/metrics.jsonl')]; print(r[-1]['tokens_per_s'])")
STEPS=$($PY -c "
import json; r=[json.loads(l) for l in open('/tmp/$NAME-probe/metrics.jsonl')]
secs = r[-1]['time'] - r[0]['time']; steps = r[-1]['step'] - r[0]['step']
print(int($BUDGET * steps / max(secs, 1e-6)))")
fi
echo "$NAME: $STEPS steps"
$PY -m corrector.finetune train "${COMMON[@]}" --train /tmp/synth.tsv $(for _ in $(seq ${REAL_TIMES:-2}); do echo "${REAL[@]}"; done) --output /tmp/$NAME --max-steps "$STEPS" \
  --warmup-steps $((STEPS / 10)) --lr "$LR" --log-every 50 --max-minutes "$GUARD" ${EXTRA_FT:-} > "$LOGS/$NAME.log" 2>&1 || { tail -30 "$LOGS/$NAME.log"; exit 1; }
$PY - /tmp/$NAME <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
for r in rows[:: max(1, len(rows) // 8)] + rows[-1:]:
    print(sys.argv[1], {k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()
           if k in ("step", "time", "gen_loss", "disc_loss", "det_precision", "det_recall", "gen_acc_errors", "gen_acc_other", "epoch")})
PYEOF
[ "$PACK" = 1 ] || exit 0
rm -rf /tmp/pack-$NAME && mkdir -p /tmp/pack-$NAME
$PY -c "
import sys; sys.path.insert(0, '.')
import torch
from corrector.pretrain.modeling import load_pair, save_pair
d, g, tok = load_pair('/tmp/$NAME')
save_pair(d, g, '/tmp/pack-$NAME/$NAME', tok, dtype=torch.float16)
"
cp /tmp/$NAME/dev.tsv /tmp/$NAME/finetune_config.json /tmp/$NAME/metrics.jsonl /tmp/pack-$NAME/$NAME/
tar cf - -C /tmp/pack-$NAME $NAME | split -b 15M - "$OUT/$NAME.tar.part-"
