"""Checks scripts/instructions' readers on real shapes of their inputs: a
callgrind dump's total, and `perf stat -x ,` counts (an event perf cannot
count is left out, never read as 0). Exits non-zero with the reason."""
import importlib.machinery
import importlib.util
import sys

path = sys.argv[1]
loader = importlib.machinery.SourceFileLoader("instructions", path)
spec = importlib.util.spec_from_loader("instructions", loader)
mod = importlib.util.module_from_spec(spec)
loader.exec_module(mod)

dump = """# callgrind format
version: 1
creator: callgrind-3.19.0
pid: 13433
cmd:  /work/main/target/release/h2probe serve
part: 1

positions: line
events: Ir
summary: 232761178

ob=(1) /usr/lib/x86_64-linux-gnu/libc.so.6
fn=(2) clone
0 12
"""
assert mod.callgrind_total(dump) == 232761178, mod.callgrind_total(dump)
assert mod.callgrind_total("events: Ir\ntotals: 42\n") == 42
assert mod.callgrind_total("events: Ir\n") is None

perf = """# started on Wed Dec  2 02:40:00 2026

1234567,,raw_syscalls:sys_enter,2004581933,100.00,,
<not supported>,,context-switches,0,100.00,,
"""
counts = mod.perf_counts(perf)
assert counts == {"raw_syscalls:sys_enter": 1234567}, counts
both = mod.perf_counts("10,,raw_syscalls:sys_enter,1,100.00,,\n3,,context-switches,1,100.00,,\n")
assert both == {"raw_syscalls:sys_enter": 10, "context-switches": 3}, both
# A request's share: an event perf did not count stays None (never 0),
# and a run in which a request failed gives no figure at all.
assert mod.per_request(counts, 400, 400) == (1234567 / 400, None), mod.per_request(counts, 400, 400)
assert mod.per_request(both, 5, 5) == (2.0, 0.6), mod.per_request(both, 5, 5)
assert mod.per_request(both, 4, 5) == (None, None)
assert mod.ratio(None, 2.0) is None and mod.ratio(1.0, None) is None and mod.ratio(1.0, 0) is None
assert mod.ratio(3.0, 2.0) == 1.5
# The workloads are scripts/bench's, each with its own request count, and
# h2load's -n and -c to set it from.
names = [w[0] for w in mod.WORKLOADS]
assert names == list(mod.REQUESTS), names
for w in mod.WORKLOADS:
    assert "-n" in w[3] and "-c" in w[3], w
print("ok")
