#!/usr/bin/env bash
# Release compile cost of `#[derive(Replicated)]` against serde + bitcode derives.
#
# Builds throwaway library crates in a temp dir, all holding the same seven game types:
#
#   replicated          `replicated.rs`: `#[derive(Replicated)]` (and `NetEnum`), with a
#                       path dependency on this workspace's `replicate`
#   serde + bitcode     `serde_bitcode.rs`: `Serialize, Deserialize, bitcode::Encode,
#                       bitcode::Decode` derives — the baseline of the ratio
#   serde + bitcode,    the same plus `serde_bitcode_use.rs`, which encodes and decodes
#   used                every type through postcard and bitcode (context only: serde's
#                       derived code is generic and costs little until instantiated)
#
# The crates use this workspace's Cargo.lock (offline) and share one target dir; their
# dependencies are built first, then each user crate alone is rebuilt in release
# (`touch src/lib.rs`) RUNS times, interleaved, and the medians of CPU (user + sys of
# cargo and rustc) and wall seconds are printed with the CPU ratio to the baseline.
# Then the size of the derives' expansion of `replicated.rs` is printed (the ignored
# test `expansion_size` of replicate-derive, rustfmt'd lines and tokens).
# The temp dir is removed at the end (KEEP=1 keeps it and prints its path).
#
# COMPARE=<another checkout of this workspace> adds a fourth crate, the same seven types
# against that checkout's `replicate`, timed in the same interleaved rounds: a
# before/after comparison on a shared machine.
#
#   benches/compile-cost/run.sh [RUNS]     # default 5
#   mkdir /tmp/old && git archive <rev> | tar -x -C /tmp/old && COMPARE=/tmp/old benches/compile-cost/run.sh
set -euo pipefail

runs=${1:-5}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/compile-cost.XXXXXX")
if [[ "${KEEP:-0}" != 1 ]]; then
    trap 'rm -rf "$tmp"' EXIT
else
    echo "temp dir: $tmp" >&2
fi

req() { # a dependency's version requirement in the workspace's Cargo.toml
    sed -n "s/^$1 = [^\"]*\"\([0-9.]*\)\".*/\1/p" "$root/Cargo.toml" | head -1
}

make_crate() { # name, dependency lines, source files...
    local name=$1 deps=$2
    shift 2
    mkdir -p "$tmp/$name/src"
    for f in "$@"; do cat "$here/$f"; done >"$tmp/$name/src/lib.rs"
    cp "$root/Cargo.lock" "$tmp/$name/Cargo.lock"
    cat >"$tmp/$name/Cargo.toml" <<TOML
[package]
name = "$name"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
$deps

[workspace]
TOML
}

# Versions: the workspace's requirements, resolved by its Cargo.lock.
serde_deps="serde = { version = \"$(req serde)\", features = [\"derive\"] }
bitcode = \"$(req bitcode)\"
postcard = { version = \"$(req postcard)\", default-features = false, features = [\"alloc\"] }"
make_crate cost-replicated "replicate = { path = \"$root/replicate\" }
glam = \"$(req glam)\"" replicated.rs
make_crate cost-serde-bitcode "$serde_deps" serde_bitcode.rs
make_crate cost-serde-bitcode-used "$serde_deps" serde_bitcode.rs serde_bitcode_use.rs
crates=(cost-replicated cost-serde-bitcode cost-serde-bitcode-used)
if [[ -n "${COMPARE:-}" ]]; then
    make_crate cost-replicated-compare "replicate = { path = \"$(cd "$COMPARE" && pwd)/replicate\" }
glam = \"$(req glam)\"" replicated.rs
    crates+=(cost-replicated-compare)
fi

export CARGO_TARGET_DIR="$tmp/target"
for c in "${crates[@]}"; do
    echo "building $c and its dependencies..." >&2
    cargo build --release --offline --quiet --manifest-path "$tmp/$c/Cargo.toml"
done

# One timed rebuild of a user crate, appended to its file as "cpu wall" (seconds).
timed() {
    touch "$tmp/$1/src/lib.rs"
    /usr/bin/time -f '%U %S %e' -o "$tmp/time" \
        cargo build --release --offline --quiet --manifest-path "$tmp/$1/Cargo.toml"
    awk '{ printf "%.2f %.2f\n", $1 + $2, $3 }' "$tmp/time" | tee -a "$tmp/$1.txt"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

for i in $(seq "$runs"); do
    line="run $i (cpu wall):"
    for c in "${crates[@]}"; do line="$line $c $(timed "$c")"; done
    echo "$line" >&2
done

cpu() { cut -d' ' -f1 "$tmp/$1.txt" | median; }
wall() { cut -d' ' -f2 "$tmp/$1.txt" | median; }
base=$(cpu cost-serde-bitcode)
row() { # label, crate
    awk -v l="$1" -v c="$(cpu "$2")" -v w="$(wall "$2")" -v b="$base" \
        'BEGIN { printf "| %s | %.2f | %.2f | %.2f |\n", l, c, w, c / b }'
}
echo
echo "| 7 types, release build of the user crate | CPU s (median of $runs) | wall s | CPU ratio |"
echo "|---|---:|---:|---:|"
row "serde + bitcode derives (baseline)" cost-serde-bitcode
row "serde + bitcode derives, used" cost-serde-bitcode-used
row "\`#[derive(Replicated)]\`" cost-replicated
if [[ -n "${COMPARE:-}" ]]; then
    row "\`#[derive(Replicated)]\`, \`COMPARE\` checkout" cost-replicated-compare
fi

expanded=$(REPLICATE_EXPAND_FILE="$here/replicated.rs" cargo test --offline --quiet \
    --manifest-path "$root/replicate-derive/Cargo.toml" --lib expansion_size \
    -- --ignored --nocapture 2>/dev/null | sed -n 's/^expanded: //p')
echo
echo "\`#[derive(Replicated)]\` and \`#[derive(NetEnum)]\` expansion of the 7 types: ${expanded:-not measured}"
