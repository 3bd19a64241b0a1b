#!/bin/sh
# Runs every cargo-fuzz target for a bounded time, after seeding its corpus from
# recorded sessions. Usage, from anywhere:
#
#   fuzz/run.sh [SECONDS_PER_TARGET] [TARGET...]
#
# SECONDS_PER_TARGET defaults to 60; the targets default to all four. Crashes land in
# fuzz/artifacts/<target>/ and the script exits non-zero on the first one (replay one
# with `RUSTC_BOOTSTRAP=1 cargo fuzz run -O <target> <artifact>` from fuzz/).
set -eu
cd "$(dirname "$0")"
seconds="${1:-60}"
[ "$#" -gt 0 ] && shift
targets="${*:-client_packets server_packets connection_headers blob_parts}"
command -v cargo-fuzz >/dev/null 2>&1 || { echo "cargo-fuzz missing: cargo install cargo-fuzz" >&2; exit 2; }
cargo run --quiet --bin seed_corpus
for target in $targets; do
    echo "== $target: ${seconds}s"
    mkdir -p "corpus/$target"
    RUSTC_BOOTSTRAP=1 cargo fuzz run -O "$target" "corpus/$target" -- \
        -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1
done
echo "no crash in: $targets"
