"""What a notebook does with a run directory, as docs/outputs.md tells it to.

Usage: notebook.py RUN_DIR   (the run's `export --format csv` already done)

Loads every output of the run with pandas and the documented dtypes, and
checks that what it gets is what a person would expect: integer columns are
integers (nullable where a field can be absent), every event type's CSV is
there, the connection key is shared by both taps, timeline.csv pivots on one
grid, and the trace.jsonl recipe keeps events only. Prints one JSON line of
what it found; exits non-zero (AssertionError) on the first surprise.
"""
import json
import os
import sys

import pandas as pd

run = sys.argv[1]
found = {}

# summary.json: one record; flat fields become columns.
with open(os.path.join(run, "summary.json")) as f:
    summary = json.load(f)
s = pd.json_normalize(summary)
assert len(s) == 1
assert s["completed"].dtype == "int64", s["completed"].dtype
found["completed"] = int(s["completed"][0])

# timeline.csv with its documented dtypes.
TIMELINE = {
    "series": "string", "kind": "string", "agg": "string", "unit": "string",
    "conn_key": "string", "stream": "Int64",
    "t_s": "float64", "bucket_s": "float64", "value": "float64",
}
tl = pd.read_csv(os.path.join(run, "timeline.csv"), dtype=TIMELINE)
for col, dt in TIMELINE.items():
    assert str(tl[col].dtype) == dt, (col, tl[col].dtype)
assert tl["bucket_s"].nunique() == 1, tl["bucket_s"].unique()
assert set(tl["kind"].unique()) <= {"cumulative", "level", "per_bucket"}
# Every t_s on the grid bucket_s says, and each series' buckets merged as
# docs/outputs.md says (a level's extreme, a count's running total, a sum).
step = tl["bucket_s"].iloc[0]
assert ((tl["t_s"] / step).round() * step - tl["t_s"]).abs().max() < 1e-6, step
assert (pd.Series(sorted(tl["t_s"].unique())).diff().dropna() >= step - 1e-6).all(), step
merged = tl.groupby("series")[["kind", "agg"]].agg(lambda c: "/".join(sorted(set(c))))
for name, how in {
    "sent": "cumulative/last",
    "queue_depth": "level/max",
    "credit_conn_client": "level/min",
    "window_updates": "per_bucket/sum",
}.items():
    assert "/".join(merged.loc[name]) == how, (name, merged.loc[name].tolist())
agg = tl[tl["stream"].isna()]
wide = agg.pivot(index="t_s", columns="series", values="value")
# One grid: every cumulative series is known at every bucket (0 before its
# first event), so a pivot has no holes in them.
for name in ("scheduled", "sent", "completed"):
    assert wide[name].notna().all(), name
    assert wide[name].is_monotonic_increasing, name
assert wide["sent"].iloc[-1] == summary["sent"], (wide["sent"].iloc[-1], summary["sent"])
credit = tl[tl["series"] == "credit_stream_client"]
streams = sorted(int(x) for x in credit["stream"].dropna().unique())
found["credit_streams"] = streams
per_stream_bytes = (
    tl[tl["series"] == "data_c2s_server"].groupby("stream")["value"].max()
)
total = sum(st["bytes"] for st in summary["streams"])
assert per_stream_bytes.sum() == total, (per_stream_bytes.sum(), total)

# windows.csv
WINDOWS = {
    "t_s": "float64", "tap": "string", "conn": "int64", "conn_key": "string",
    "flow": "string", "stream": "int64", "window": "int64",
}
w = pd.read_csv(os.path.join(run, "windows.csv"), dtype=WINDOWS)
for col, dt in WINDOWS.items():
    assert str(w[col].dtype) == dt, (col, w[col].dtype)
keys = w.groupby("tap")["conn_key"].unique()
assert set(keys["client"]) == set(keys["server"]), keys
# The same connection, the two taps: the final stream windows agree.
last = w.groupby(["tap", "conn_key", "flow", "stream"])["window"].last().unstack("tap")
assert (last["client"] == last["server"]).all(), last
found["conn_keys"] = sorted(str(k) for k in keys["client"])

# csv/: every event type, loaded with dtypes.json, empty or not.
with open(os.path.join(run, "csv", "dtypes.json")) as f:
    dtypes = json.load(f)
frames = None
empty = []
for name, cols in dtypes.items():
    df = pd.read_csv(os.path.join(run, "csv", name + ".csv"), dtype=cols)
    assert set(df.columns) == set(cols), (name, list(df.columns))
    for col, dt in cols.items():
        assert str(df[col].dtype) == dt, (name, col, df[col].dtype, dt)
    if df.empty:
        empty.append(name)
    if name == "frame":
        frames = df
found["empty_files"] = sorted(empty)
wu = frames[frames["frame"] == "WINDOW_UPDATE"]
# A nullable integer: present exactly on WINDOW_UPDATE frames, integral.
assert frames["increment"].notna().sum() == len(wu)
assert (wu["increment"] > 0).all()
assert frames.groupby("ep")["conn_key"].unique().map(tuple).nunique() == 1

# trace.jsonl: read_json puts the header and footer lines in as rows (and
# their NaN times turn `t` into floats); the documented recipe drops them.
trace = pd.read_json(os.path.join(run, "trace.jsonl"), lines=True)
events = trace[~trace["type"].isin(["header", "footer"])].astype({"t": "int64"})
assert len(trace) == len(events) + 2
n_frames = int((events["type"] == "frame").sum())
assert n_frames == len(frames), (n_frames, len(frames))
found["events"] = len(events)

print(json.dumps(found))
