# Shared by scripts/gpu/pretrain.sh and finetune.sh (sourced): unpack what travelled, print a run's
# metrics, and pack a model directory for the trip back from the GPU machine (files of at most 16 MiB come back).

unpack_xz() {  # SRC.xz DEST: DEST from SRC once (atomic, so an interrupted unpack is redone), or stop
  [ -f "$2" ] && return 0
  { xz -T4 -dc "$1" > "$2.tmp" && mv "$2.tmp" "$2"; } || {
    echo "cannot read $1: a git-ignored DATA folder (.gpu) travels only when the device call names it in carry" >&2
    exit 1; }
}

show_metrics() {  # DIR KEY...: about ten rows of DIR/metrics.jsonl, the given keys plus step/time/epoch
  "$PY" - "$@" <<'PYEOF'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1] + "/metrics.jsonl")]
keys = set(sys.argv[2:]) | {"step", "time", "epoch"}
for r in rows[:: max(1, len(rows) // 10)] + rows[-1:]:
    print(sys.argv[1], {k: round(v, 4) if isinstance(v, float) else v for k, v in r.items() if k in keys})
PYEOF
}

pack_model() {  # DIR NAME [FILE...]: DIR's release layout (`finetune ship`: fp16 weights, tokenizer)
                # plus DIR/FILE..., as $OUT/NAME.tar.part-* pieces of 15 MB
  local dir=$1 name=$2; shift 2
  rm -rf "/tmp/pack-$name" && mkdir -p "/tmp/pack-$name"
  "$PY" -m corrector.finetune ship --model "$dir" --output "/tmp/pack-$name/$name" || return 1
  for file in "$@"; do cp "$dir/$file" "/tmp/pack-$name/$name/"; done
  tar cf - -C "/tmp/pack-$name" "$name" | split -b 15M - "$OUT/$name.tar.part-"
}
