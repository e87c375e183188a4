#!/bin/bash
# Two builds of packrec converting the same inputs, alternately, warm cache: a change's cost on
# the convert path, measured side by side (docs/benchmarks.md). Folder -> shard (the listing
# engine) and WebDataset tars -> shard (the stream engine).
#
#   benchmarks/convert_ab.sh OLD_PACKREC NEW_PACKREC [CLASSES PER_CLASS ROUNDS]
set -euo pipefail
old=$1 new=$2 classes=${3:-20} per_class=${4:-1000} rounds=${5:-3}
work=$(mktemp -d "${TMPDIR:-/tmp}/packrec-convert-ab.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$new" synth "$work/tree" --classes "$classes" --per-class "$per_class" >/dev/null
"$new" convert -q "$work/tree" "$work/tars" --format wds >/dev/null
cat "$work"/tree/*/* "$work"/tars/*.tar >/dev/null  # warm
seconds() { local start end; start=$(date +%s.%N); "$@" >/dev/null; end=$(date +%s.%N); echo "$end - $start" | bc; }
echo "round build folder->shard_s wds->shard_s"
for round in $(seq "$rounds"); do
  for build in old new; do
    cli=$old; [ "$build" = new ] && cli=$new
    rm -rf "$work/a" "$work/b"
    folder=$(seconds "$cli" convert -q "$work/tree" "$work/a")
    wds=$(seconds "$cli" convert -q "$work/tars/*.tar" "$work/b" --from wds)
    echo "$round $build $folder $wds"
  done
done
