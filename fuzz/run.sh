#!/usr/bin/env bash
# Fuzzes one target (or all) for a while with libFuzzer, from and into the committed corpus.
#   fuzz/run.sh TARGET [SECONDS]     e.g. fuzz/run.sh ioctl 600
#   fuzz/run.sh all [SECONDS]        every target in turn
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). New interesting
# inputs land in fuzz/corpus/TARGET; a crash lands in fuzz/libfuzzer/artifacts/TARGET with the
# command that reproduces it. Minimise the corpus before committing: cargo fuzz cmin.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: fuzz/run.sh TARGET|all [SECONDS]}
seconds=${2:-600}
targets=(ioctl frame scenario record cabi)
[[ $target == all ]] || targets=("$target")
# Built once, before any target runs: a source edited meanwhile cannot break a later target.
cargo +nightly fuzz build --fuzz-dir fuzz/libfuzzer -O
bin=fuzz/libfuzzer/target/x86_64-unknown-linux-gnu/release
failed=()
for t in "${targets[@]}"; do
    mkdir -p "fuzz/corpus/$t" "fuzz/libfuzzer/artifacts/$t"
    "$bin/$t" -artifact_prefix="fuzz/libfuzzer/artifacts/$t/" -max_total_time="$seconds" \
        -rss_limit_mb=4096 -timeout=30 -print_final_stats=1 "fuzz/corpus/$t" ||
        failed+=("$t")
done
if ((${#failed[@]})); then
    echo "fuzz/run.sh: findings in: ${failed[*]} (see fuzz/libfuzzer/artifacts)" >&2
    exit 1
fi
