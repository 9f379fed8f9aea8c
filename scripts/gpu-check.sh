#!/usr/bin/env bash
# The GPU check, for a session lent a machine with an NVIDIA GPU (which has no Rust
# toolchain and no network): `scripts/gpu-check.sh build` here builds every binary it runs
# into gpu-run/, with the OpenCL and Vulkan loaders, the TensorFlow models and the Keras
# models of tests/python/keras_models.py (made here, the device having no TensorFlow; those
# over 20 MB left out, for the device run's 64 MiB), and packs it as gpu-pack/gpu-run.tgz
# (both ignored by git); there, with gpu-pack carried,
# `tar -xzf gpu-pack/gpu-run.tgz && scripts/gpu-check.sh run` runs them and writes its logs
# to $OUT (or gpu-run/out; at most 8 files come back from a device run). What it runs: the
# CUDA backend's whole conformance suite, the families the kit's IR renders (sparse,
# layers) on NVIDIA's OpenCL and on its Vulkan driver through wgpu, the frozen TensorFlow
# and Keras models on every device (CUDA with cuDNN), the zoo models of issue 50 under 20 MB
# by `polytensor run` on every device, and
# the CUDA benchmark (with the one built from BASE, if given, in the same run:
# `BASE=<commit> scripts/gpu-check.sh build`).
set -uo pipefail
cd "$(dirname "$0")/.."
RUN=gpu-run

# The test or bench executable cargo builds for `$@` (with --no-run).
executable() {
    cargo "$@" --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["executable"])' | tail -1
}

build() {
    export CARGO_INCREMENTAL=0 CARGO_PROFILE_DEV_DEBUG=0
    rm -rf "$RUN" && mkdir -p "$RUN/bin" "$RUN/lib" "$RUN/tf-golden"
    local name spec exe
    # (Each crate's integration tests are one binary, `it`; the runs below pick their
    # module by filter.)
    for spec in "cuda_conformance test -p polytensor-cuda --test it" \
        "opencl_conformance test -p polytensor-opencl --test it" \
        "wgpu_conformance test -p polytensor-wgpu --test it" \
        "models test --features cuda,opencl,wgpu --test it" \
        "cuda_bench bench -p benches --bench cuda"; do
        read -r name spec <<<"$spec"
        # shellcheck disable=SC2086
        exe=$(executable $spec)
        [ -n "$exe" ] || { echo "no executable for: cargo $spec" >&2; exit 1; }
        cp "$exe" "$RUN/bin/$name" && strip "$RUN/bin/$name"
    done
    if [ -n "${BASE:-}" ]; then
        # The same bench at BASE, built in a worktree that shares this target folder.
        local tree here=$PWD
        tree=$(mktemp -d)/base
        git worktree add -q --detach "$tree" "$BASE"
        exe=$(cd "$tree" && CARGO_TARGET_DIR="$here/target" executable bench -p benches --bench cuda)
        cp "$exe" "$RUN/bin/cuda_bench_base" && strip "$RUN/bin/cuda_bench_base"
        git worktree remove --force "$tree"
    fi
    # The command, for the zoo of issue 50 on every device: its text CNN and transformer
    # block (made by the models bench into target/zoo-bench, or here); its MobileNetV3Small
    # and EfficientNetB0 are the Keras models' (the same networks, other seeds).
    cargo build --release -q -p polytensor-cli || exit 1
    cp target/release/polytensor "$RUN/bin/" && strip "$RUN/bin/polytensor"
    mkdir -p "$RUN/zoo"
    local zoo
    for zoo in zoo_text_cnn zoo_transformer_encoder; do
        [ -f "target/zoo-bench/$zoo.pb" ] ||
            target/tf-venv/bin/python tests/python/keras_models.py target/zoo-bench "$zoo" >/dev/null
        cp "target/zoo-bench/$zoo.pb" "$RUN/zoo/"
    done
    cp -L /usr/lib/x86_64-linux-gnu/libOpenCL.so.1 "$RUN/lib/"
    # The Vulkan loader and glvnd, which NVIDIA's Vulkan driver (libGLX_nvidia) needs: the
    # device's image has neither.
    mkdir -p "$RUN/gl" /tmp/amd64/partial
    local apt='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
    # shellcheck disable=SC2086
    apt-get $apt update -qq >/dev/null 2>&1
    # shellcheck disable=SC2086
    (cd "$RUN/gl" && apt-get $apt download -qq libvulkan1 libegl1 libglvnd0 libopengl0 \
        libgl1 libglx0 libgles2 2>/dev/null)
    cp -r ../shared/tf-golden/models "$RUN/tf-golden/"
    local keras=$RUN/keras-models model
    target/tf-venv/bin/python tests/python/keras_models.py "$keras" >/dev/null || exit 1
    for model in "$keras"/*.pb; do
        [ "$(stat -c %s "$model")" -le 20000000 ] || rm "$model" "${model%.pb}.json"
    done
    python3 -c 'import json, os, sys
d = sys.argv[1]
index = json.load(open(os.path.join(d, "index.json")))
index["models"] = [m for m in index["models"] if os.path.exists(os.path.join(d, m["name"] + ".pb"))]
index["count"] = len(index["models"])
json.dump(index, open(os.path.join(d, "index.json"), "w"), indent=1)' "$keras"
    # Where the tests look for it: beside the checkout they were built in.
    echo "$(cd .. && pwd)/shared/tf-golden" >"$RUN/golden-path"
    mkdir -p gpu-pack && tar -czf gpu-pack/gpu-run.tgz "$RUN"
    du -sh "$RUN" gpu-pack/gpu-run.tgz
}

run() {
    local out=${OUT:-$RUN/out}
    mkdir -p "$out"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/summary.txt"
    local deb
    for deb in "$RUN"/gl/*.deb; do dpkg -x "$deb" /; done
    ldconfig
    # The image's CUDA 13 libraries (NVRTC, cuBLAS, cuDNN) from its PyTorch venv.
    local libs
    libs=$(python3 -c 'import glob, os, site
print(":".join(sorted({os.path.dirname(p) for d in site.getsitepackages()
                        for p in glob.glob(d + "/nvidia/**/lib*.so*", recursive=True)})))')
    export LD_LIBRARY_PATH="$PWD/$RUN/lib:$libs:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
    # NVIDIA's OpenCL driver through the carried ICD loader; its Vulkan driver for wgpu.
    mkdir -p /tmp/icd && echo libnvidia-opencl.so.1 >/tmp/icd/nvidia.icd
    export OCL_ICD_VENDORS=/tmp/icd
    local vk=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
    [ -f "$vk" ] && export VK_DRIVER_FILES=$vk \
        __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
    # The tests find the golden data beside the checkout they were built in.
    local golden
    golden=$(cat "$RUN/golden-path")
    mkdir -p "$golden" && cp -r "$RUN/tf-golden/models" "$golden/"
    local status=0
    step() {
        local log=$1
        shift
        echo "=== $*" | tee -a "$out/summary.txt"
        local start=$SECONDS
        "$@" >"$out/$log" 2>&1
        local rc=$?
        grep -E "passed|failed|FAIL|test result" "$out/$log" | tail -20 | tee -a "$out/summary.txt"
        echo "rc=$rc in $((SECONDS - start)) s" | tee -a "$out/summary.txt"
        [ $rc -eq 0 ] || status=1
    }
    POLYTENSOR_REQUIRE=cuda step cuda.txt "$RUN/bin/cuda_conformance" conformance:: --nocapture
    POLYTENSOR_REQUIRE=opencl step opencl.txt "$RUN/bin/opencl_conformance" conformance::sparse \
        conformance::layers --nocapture
    POLYTENSOR_REQUIRE=wgpu step wgpu.txt "$RUN/bin/wgpu_conformance" conformance::sparse \
        conformance::layers --nocapture
    POLYTENSOR_REQUIRE=cuda POLYTENSOR_REQUIRE_GOLDEN=1 \
        POLYTENSOR_KERAS_MODELS="$PWD/$RUN/keras-models" step models.txt \
        "$RUN/bin/models" models:: --skip saved_models:: --nocapture --test-threads=1
    local bench
    for bench in cuda_bench_base cuda_bench; do
        [ -x "$RUN/bin/$bench" ] || continue
        step "$bench.txt" "$RUN/bin/$bench" --bench --warm-up-time 1 --measurement-time 3
    done
    # The zoo on every device (cuDNN on CUDA; NVIDIA's OpenCL and Vulkan drivers) in f32,
    # and on the CPU in mixed precision too (`--bf16`: a change only where it has
    # AVX512-BF16), median of 20 runs.
    zoo() {
        local model device batch
        for model in "$RUN"/zoo/*.pb "$RUN"/keras-models/keras_{mobilenet_v3_small,efficientnet_b0}.pb; do
            for device in cpu:0 cpu:0+bf16 cuda:0 opencl:0 wgpu:0; do
                local mode=()
                [ "$device" = cpu:0+bf16 ] && mode=(--bf16)
                for batch in 1 16; do
                    local result
                    result=$(timeout 90 "$RUN/bin/polytensor" run "$model" \
                        --device "${device%+bf16}" "${mode[@]}" --batch "$batch" --repeat 20 \
                        2>&1 | grep -oE 'p50 [0-9.]+ ms|error.*' | head -1)
                    echo "$(basename "$model" .pb) $device batch $batch: ${result:-no result}"
                done
            done
        done
    }
    step zoo.txt zoo
    return $status
}

case "${1:-}" in
build) build ;;
run) run ;;
*)
    echo "usage: $0 build|run" >&2
    exit 2
    ;;
esac
