#!/usr/bin/env bash
# Make sure a nightly toolchain with the given components is installed (for Miri and
# cargo-fuzz), without updating a nightly that is already there.
#   scripts/nightly.sh miri rust-src
set -euo pipefail
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    components=()
    for c in "$@"; do components+=(--component "$c"); done
    rustup toolchain install nightly --profile minimal --allow-downgrade "${components[@]}"
    exit 0
fi
installed="$(rustup +nightly component list --installed)"
for c in "$@"; do
    grep -q "^$c" <<<"$installed" || rustup component add "$c" --toolchain nightly
done
