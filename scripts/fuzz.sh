#!/usr/bin/env bash
# Run polytensor's cargo-fuzz targets (fuzz/): TensorProto decoding, TensorSlice parsing,
# the view/bitcast API, and checkpoints (index and data files). Installs what it needs: a
# nightly toolchain and cargo-fuzz (into target/tools). Each target runs for SECONDS
# (default 60), as many at once as there are cores; CI runs a short smoke run:
#
#   scripts/fuzz.sh --dev 20           # every target, 20 s each, built unoptimised (what
#                                      # .ci/run does: the optimised build takes minutes)
#   scripts/fuzz.sh 3600               # every target for an hour, optimised (the longer run
#   scripts/fuzz.sh 3600 tensor_proto  # documented in docs/ARCHITECTURE.md), or one target
#
# The corpus grows in target/fuzz/corpus/TARGET; TensorFlow's golden protos (../shared) seed
# the TensorProto target. A crash leaves its input in fuzz/artifacts/TARGET and fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
profile=()
if [ "${1:-}" = --dev ]; then
    profile=(--dev)
    shift
fi
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(tensor_proto tensor_slice views checkpoint)

scripts/nightly.sh
tools="$PWD/target/tools"
if [ ! -x "$tools/bin/cargo-fuzz" ]; then
    cargo install --quiet --locked --root "$tools" cargo-fuzz
fi
export PATH="$tools/bin:$PATH"
export CARGO_TARGET_DIR="$PWD/target/fuzz"

mkdir -p "$CARGO_TARGET_DIR"
if ! cargo +nightly fuzz build "${profile[@]}" >"$CARGO_TARGET_DIR/build.log" 2>&1; then
    cat "$CARGO_TARGET_DIR/build.log" >&2
    exit 1
fi
# One target at a time per core: each runs for SECONDS, its report kept in its log.
fuzz_one() {
    local target=$1
    corpus="$CARGO_TARGET_DIR/corpus/$target"
    mkdir -p "$corpus"
    seeds=()
    if [ "$target" = tensor_proto ] && [ -d ../shared/tf-golden/tensor_proto ]; then
        seeds=(../shared/tf-golden/tensor_proto/decode ../shared/tf-golden/tensor_proto/encode)
    fi
    if [ "$target" = checkpoint ] && [ -d ../shared/tf-golden/checkpoints ]; then
        # TensorFlow's single-shard checkpoints, as the target reads its input: the index's
        # length (two bytes, little-endian), the index, the data file.
        seeds=("$CARGO_TARGET_DIR/seeds/checkpoint")
        mkdir -p "${seeds[0]}"
        for index in ../shared/tf-golden/checkpoints/*/ckpt.index; do
            data="${index%.index}.data-00000-of-00001"
            [ -f "$data" ] || continue
            seed="${seeds[0]}/$(basename "$(dirname "$index")")"
            size=$(stat -c %s "$index")
            printf "$(printf '\\%03o\\%03o' $((size % 256)) $((size / 256)))" > "$seed"
            cat "$index" "$data" >> "$seed"
        done
    fi
    echo "fuzzing $target for ${seconds}s"
    rm -rf "fuzz/artifacts/$target"
    cargo +nightly fuzz run "${profile[@]}" "$target" "$corpus" "${seeds[@]}" -- \
        -max_total_time="$seconds" -max_len=4096 -print_final_stats=1 2>&1 \
        | grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|Done|==[0-9]+==|SUMMARY|thread|.*panicked)' || true
}
jobs=$(nproc)
running=0
for target in "${targets[@]}"; do
    fuzz_one "$target" >"$CARGO_TARGET_DIR/$target.log" 2>&1 &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait -n || true
        running=$((running - 1))
    fi
done
wait
crashed=0
for target in "${targets[@]}"; do
    cat "$CARGO_TARGET_DIR/$target.log"
    # cargo fuzz exits non-zero on a crash; grep's status above hides it, so check the
    # artifacts, which libFuzzer writes only for a crashing input.
    if compgen -G "fuzz/artifacts/$target/*" >/dev/null; then
        echo "fuzz target $target crashed: see fuzz/artifacts/$target" >&2
        crashed=1
    fi
done
exit "$crashed"
