#!/usr/bin/env bash
# `poseidon_train time` runs every reference model: each models/*/deploy
# net, at batch 1 (the first dim of its Input shape rewritten), for one
# iteration, must print a forward and a backward line for every layer and
# the averages. Deploy nets have no loss, so their backward lines read ~0 ms;
# the training nets' backward passes run in test_model_corpus.sh.
# Usage: test_time_models.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
source "$(cd "$(dirname "$0")" && pwd)/test_lib.sh"
SOURCE_DIR=$(cd "$1" && pwd)
BUILD_DIR=$(cd "$2" && pwd)
TRAIN="$BUILD_DIR/tools/poseidon_train"
make_workdir poseidon_time_models
cd "$SOURCE_DIR"

models=$(ls -d models/*/ | xargs -n1 basename)
for model in $models; do
  deploy="models/$model/deploy.prototxt"
  [ -f "$deploy" ] || continue
  net="$WORK/$model.prototxt"
  sed -E '0,/dim: [0-9]+/s//dim: 1/' "$deploy" > "$net"
  start=$SECONDS
  status=0
  "$TRAIN" time --model="$net" --iterations=1 > "$WORK/log" 2>&1 || status=$?
  if [ "$status" -ne 0 ]; then
    fail "$model: exit status $status"; grep -E "Error|Check" "$WORK/log"
    continue
  fi
  # Every layer named in the net has both per-layer lines.
  missing=""
  layers=0
  for name in $(grep -E '^  name: ' "$net" | sed -E 's/.*"(.*)"/\1/'); do
    layers=$((layers + 1))
    if ! grep -qF " $name	forward: " "$WORK/log" ||
       ! grep -qF " $name	backward: " "$WORK/log"; then
      missing="$missing $name"
    fi
  done
  if [ -n "$missing" ] || [ "$layers" = 0 ] ||
     ! grep -q "Average Forward pass: " "$WORK/log" ||
     ! grep -q "Average Forward-Backward: " "$WORK/log"; then
    fail "$model: per-layer lines missing for:$missing"
    continue
  fi
  ms=$(grep -o "Average Forward pass: [0-9.]*" "$WORK/log" | awk '{print $4}')
  ok "$model: $layers layers, forward $ms ms at batch 1" \
     "($((SECONDS - start)) s)"
done

# shellcheck disable=SC2154  # passed: counted by test_lib.sh
[ "$passed" -gt 0 ] || fail "no models/*/deploy.prototxt ran"
finish
