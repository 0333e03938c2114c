"""Checks scripts/bench's verdicts on made-up rounds: issue #11's goals
judged on the medians of ratios paired within a round. Exits non-zero (with
the reason) on a wrong one."""
import importlib.machinery
import importlib.util
import sys

path = sys.argv[1]
loader = importlib.machinery.SourceFileLoader("bench", path)
spec = importlib.util.spec_from_loader("bench", loader)
bench = importlib.util.module_from_spec(spec)
loader.exec_module(bench)

W = bench.WORKLOADS
small, large = W[2], W[1]  # 16 KiB requests; 1 MiB at 16 MiB windows


def res(rps, cpu=1.0, dropped=0):
    return {"rps": rps, "cpu_per_gb": cpu, "dropped": dropped}


rows = {}
for w in (small, large):
    # Rounds 1 and 2 ran twice as fast for every server: paired, the
    # default trace's ratios are 0.91, 0.91, 0.80 (median 0.91, met); the
    # medians of its rates unpaired would give 160 / 200 = 0.80 (not met).
    rows[(w[0], "bare")] = [(0, res(100, 1.0, None)), (1, res(200, 1.0, None)), (2, res(200, 1.0, None))]
    rows[(w[0], "nghttpd")] = [(0, res(100, 1.0, None)), (1, res(200, 1.0, None)), (2, res(200, 1.0, None))]
    rows[(w[0], "default")] = [(0, res(91, 1.4)), (1, res(182, 1.6)), (2, res(160, 1.45))]
    rows[(w[0], "off")] = [(0, res(96, 1.0)), (1, res(196, 1.0)), (2, res(194, 1.0))]
# Full capture: fast enough, but one round dropped events on short requests.
rows[(small[0], "full")] = [(0, res(75)), (1, res(150, 1.0, 3)), (2, res(160))]
rows[(large[0], "full")] = [(0, res(75)), (1, res(150)), (2, res(160))]

table = bench.goal_table([large, small], rows)
text = "\n".join(table)
lines = {l.split(" | ")[0].lstrip("| "): l for l in table if l.startswith("| ") and "---" not in l}


def cells(w):
    return [c.strip() for c in lines[w[0]].strip("|").split("|")[1:]]


header = [c.strip() for c in table[2].strip("|").split("|")[1:]]
want = {
    # default 0.91; full 0.75, 0.75, 0.80 -> 0.75; off 0.96, 0.98, 0.97 ->
    # 0.97; CPU 1.4, 1.6, 1.45 -> 1.45; ÷ nghttpd the same as ÷ bare.
    large[0]: ["0.91 met", "0.75 met", "0.97 met", "0.91 not met", "1.45 met"],
    small[0]: ["0.91 met", "0.75 not met", "0.97 met", "-", "1.45 met"],
}
assert header == [g[0] for g in bench.GOALS], header
for w in (large, small):
    got = cells(w)
    assert got == want[w[0]], f"{w[0]}: {got} != {want[w[0]]}\n{text}"

# Only the bare sink ran: no goal can be judged, and no table is printed.
assert bench.goal_table([small], {(small[0], "bare"): rows[(small[0], "bare")]}) == []
print(text)
