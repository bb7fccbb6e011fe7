#!/usr/bin/env bash
# Leave-one-source-out training and evaluation, then the shipped run on every source.
#   bash training/loso.sh SOURCES [FOLDS...]
# A fold is NAME=SOURCE,SOURCE (whole sources held out); default: A=davidson,wice
# B=toxigen,begin. Each fold: make_data --hold-out, train, export, evaluate on the held-out
# sources (and our held-out split). Then "all": every source, no hold-out.
# Writes training/out/<fold>/{train.log,judge-lora.gguf,quality.json}.
set -euo pipefail
SOURCES=${1:?usage: loso.sh SOURCES [NAME=SRC,SRC ...]}
shift
FOLDS=("$@")
[ ${#FOLDS[@]} -gt 0 ] || FOLDS=(A=davidson,wice B=toxigen,begin)
SCALE_FOLD=${SCALE_FOLD:-1.2}
SCALE_ALL=${SCALE_ALL:-2.0}
PY=.venv/bin/python
TPY=training/.venv/bin/python
LLAMA_CPP=$(ls -d training/.cache/llama_cpp_python-*/vendor/llama.cpp | head -1)
MODEL=$($PY -m localjudge models assemble gemma-3-270m | sed 's/^[^:]*: //')

run_fold() {  # name, hold-out list, scale
  local name=$1 hold=$2 scale=$3 out=training/out/$1
  mkdir -p "$out"
  [ -s "training/data-$name/train.tokens.jsonl" ] ||
    $PY training/make_data.py --sources "$SOURCES" --out "training/data-$name" \
      --hold-out "$hold" --scale "$scale"
  [ -f "$out/adapter/adapter_config.json" ] ||
    $TPY training/train.py --data "training/data-$name" --model-dir "$(dirname "$MODEL")" \
      --gguf "$(basename "$MODEL")" --out "$out/adapter" > "$out/train.log" 2>&1
  [ -s "$out/judge-lora.gguf" ] ||
    $TPY training/export.py --adapter "$out/adapter" --model-dir "$(dirname "$MODEL")" \
      --gguf "$(basename "$MODEL")" --llama-cpp "$LLAMA_CPP" --outfile "$out/judge-lora.gguf"
}

for fold in "${FOLDS[@]}"; do run_fold "${fold%%=*}" "${fold#*=}" "$SCALE_FOLD"; done
run_fold all "" "$SCALE_ALL"
for fold in "${FOLDS[@]}"; do
  name=${fold%%=*}
  [ -s "training/out/$name/quality.json" ] ||
    $PY training/evaluate.py --adapter "training/out/$name/judge-lora.gguf" \
      --data "training/data-$name" --no-base --no-dev --out "training/out/$name/quality.json"
done
[ -s training/out/all/quality.json ] ||
  $PY training/evaluate.py --adapter training/out/all/judge-lora.gguf --data training/data-all \
    --no-base --out training/out/all/quality.json
