#!/usr/bin/env bash
# Builds the libFuzzer targets in Fuzz/ (every module compiled with -sanitize=fuzzer, in a
# build folder of their own) and runs each for SECONDS (default 60) from its seed corpus in
# Fuzz/Corpus/. A crash stops the script with exit 1 and leaves the input that caused it
# in Fuzz/crashes/ (replay: Fuzz/.build/debug/FuzzX Fuzz/crashes/crash-…).
#   scripts/fuzz.sh [SECONDS] [TARGET…]      targets: FuzzJSON FuzzFrames FuzzBLIP FuzzLogLines
set -euo pipefail
cd "$(dirname "$0")/../Fuzz"
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(FuzzJSON FuzzFrames FuzzBLIP FuzzLogLines)

echo "fuzz: building the targets with -sanitize=fuzzer…"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A failed build must not leave an older binary to be fuzzed in its place.
if ! swift build -Xswiftc -sanitize=fuzzer > "$work/build.log" 2>&1; then
    grep -E "error" "$work/build.log" | sort -u | head -20
    echo "fuzz: the build failed"
    exit 1
fi
grep -E "warning: |Build complete" "$work/build.log" || true
mkdir -p crashes
for target in "${targets[@]}"; do
    seeds="Corpus/$(echo "${target#Fuzz}" | tr '[:upper:]' '[:lower:]')"
    mkdir -p "$work/$target"
    echo "fuzz: $target for ${seconds} s (seeds: Fuzz/$seeds)"
    # Swift's own crash reporter would take the trap before libFuzzer could save the input.
    if ! SWIFT_BACKTRACE=enable=no ".build/debug/$target" -max_total_time="$seconds" -timeout=10 \
            -rss_limit_mb=1024 -artifact_prefix=crashes/ -print_final_stats=1 \
            "$work/$target" "$seeds" > "$work/$target.log" 2>&1; then
        grep -E "Fatal error|ERROR|SUMMARY|Test unit written" "$work/$target.log" || tail -20 "$work/$target.log"
        echo "fuzz: $target FAILED (input kept in Fuzz/crashes/)"
        exit 1
    fi
    runs=$(grep -E "^stat::number_of_executed_units" "$work/$target.log" | awk '{print $2}')
    cov=$(grep -oE "cov: [0-9]+" "$work/$target.log" | tail -1)
    echo "fuzz: $target passed: ${runs:-?} inputs, $cov edges, no crash"
done
