#!/usr/bin/env python3
"""Prints criterion's results for replicate-bench as markdown tables (ns per element).

Usage (after `cargo bench -p replicate-bench`), from the workspace root:
    python3 benches/criterion_table.py [target/criterion]

Reads each benchmark's `new/estimates.json` (median of the per-iteration time and its
95% confidence interval) and `new/benchmark.json` (the throughput in elements), and
divides by the element count: ns per field for `bitstream_*`, ns per struct for
`game_struct_*`. The last column compares with replicate's plain write / read /
serialize / deserialize row of the group.
"""
import json
import pathlib
import sys

ORDER = ["bitstream_write", "bitstream_read", "game_struct_encode", "game_struct_decode"]
UNIT = {"bitstream": "ns / field", "game_struct": "ns / struct"}
# The row each group is compared with (else its first row).
BASELINES = {"replicate_BitWriter", "replicate_BitReader", "replicate_serialize", "replicate_deserialize"}


def main() -> None:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "target/criterion")
    groups: dict[str, list[tuple[str, float, float, float]]] = {}
    for bench in sorted(root.glob("*/*/new/benchmark.json")):
        meta = json.loads(bench.read_text())
        est = json.loads((bench.parent / "estimates.json").read_text())["median"]
        n = (meta.get("throughput") or {}).get("Elements", 1)
        ci = est["confidence_interval"]
        groups.setdefault(meta["group_id"], []).append(
            (meta["function_id"], est["point_estimate"] / n, ci["lower_bound"] / n, ci["upper_bound"] / n)
        )
    for group in sorted(groups, key=lambda g: (ORDER.index(g) if g in ORDER else len(ORDER), g)):
        rows = groups[group]
        # replicate's rows first, in the order criterion names them.
        rows.sort(key=lambda r: (not r[0].startswith("replicate"), r[0]))
        unit = next((u for p, u in UNIT.items() if group.startswith(p)), "ns / element")
        base_name = next((r[0] for r in rows if r[0] in BASELINES), rows[0][0])
        base = next(r[1] for r in rows if r[0] == base_name)
        print(f"**{group}**\n")
        print(f"| benchmark | {unit} (median) | 95% CI | vs {base_name} |")
        print("|---|---:|---:|---:|")
        for name, med, lo, hi in rows:
            print(f"| {name} | {med:.2f} | {lo:.2f} – {hi:.2f} | {med / base:.2f}x |")
        print()


if __name__ == "__main__":
    main()
