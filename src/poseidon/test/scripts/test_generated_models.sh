#!/usr/bin/env bash
# The generated prototxt files against their generator and the schema:
#   1. models/ holds what scripts/gen_models.py writes (--check; a stale file
#      is named);
#   2. that check notices a change (a copy of models/ with one line of
#      vgg16's deploy net changed must fail, naming the file);
#   3. the benchmarks' timing nets, which are not committed, are written
#      (--timing-only, as each benchmark does) and scripts/check_models.py
#      parses every prototxt of models/, examples/ and scripts/bench/nets
#      against caffe.proto and walks each net's shapes.
# Usage: test_generated_models.sh SOURCE_DIR
set -uo pipefail
source "$(cd "$(dirname "$0")" && pwd)/test_lib.sh"
SOURCE_DIR=$(cd "$1" && pwd)
PYTHON=${PYTHON:-python3}
enter_workdir poseidon_generated_models

check "models/ matches scripts/gen_models.py" \
  "$PYTHON" "$SOURCE_DIR/scripts/gen_models.py" --check --out "$SOURCE_DIR"

mkdir -p copy && cp -r "$SOURCE_DIR/models" copy/
sed -i '0,/num_output: 64/s//num_output: 65/' copy/models/vgg16/deploy.prototxt
expect_status "a changed model file is found stale" 1 \
  "stale .*models/vgg16/deploy.prototxt" \
  "$PYTHON" "$SOURCE_DIR/scripts/gen_models.py" --check --out "$PWD/copy"

check "the timing nets are written" \
  "$PYTHON" "$SOURCE_DIR/scripts/gen_models.py" --timing-only --out "$SOURCE_DIR"
expect_in "vgg16's timing net exists" "VGG" \
  "$SOURCE_DIR/scripts/bench/nets/vgg16_time.prototxt"
check "every shipped prototxt parses and its shapes follow" \
  "$PYTHON" "$SOURCE_DIR/scripts/check_models.py"
tail -1 out.txt
finish
