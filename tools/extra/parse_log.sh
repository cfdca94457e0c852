#!/usr/bin/env bash
# Usage: parse_log.sh /path/to/your.log
# As Caffe's parse_log.sh: writes two space-separated tables into the current
# directory (the input to plot_training_log.py.example-style scripts):
#     your.log.train  (columns: '#Iters Seconds TrainingLoss LearningRate')
#     your.log.test   (columns: '#Iters Seconds TestAccuracy TestLoss')
# TrainingLoss is the displayed (smoothed) loss; TestAccuracy and TestLoss
# are the first test net's outputs #0 and #1. Works on poseidon_train and
# Caffe logs; parse_log.py writes the CSV tables with every output.
set -euo pipefail
if [ "$#" -lt 1 ]; then
  echo "Usage: parse_log.sh /path/to/your.log" >&2
  exit 1
fi
DIR="$(cd "$(dirname "$0")" && pwd -P)"
exec "${PYTHON:-python3}" "$DIR/parse_log.py" --legacy "$1" .
