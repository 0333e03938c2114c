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
# The workloads are scripts/bench's, each with its own request count.
names = [w[0] for w in mod.WORKLOADS]
assert names == list(mod.REQUESTS), names
print("ok")
