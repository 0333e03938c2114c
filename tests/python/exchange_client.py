"""A stock Python grpcio bidirectional-streaming call to h2probe's Exchange.

Usage: exchange_client.py STUBS_DIR HOST:PORT COUNT PAYLOAD_BYTES
Sends COUNT attempts (ids 0..COUNT-1, no deadline) and prints one JSON line
with the outcomes received, counted by result, and how many ids were
answered more than once.
"""
import json
import sys
from collections import Counter

sys.path.insert(0, sys.argv[1])
import grpc  # noqa: E402
import h2probe_pb2  # noqa: E402
import h2probe_pb2_grpc  # noqa: E402


def attempts(count, size):
    payload = bytes(i % 251 for i in range(size))
    for i in range(count):
        yield h2probe_pb2.Attempt(id=i, attempt=1, scheduled_ns=0, deadline_ns=0, payload=payload)


def main():
    target, count, size = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    with grpc.insecure_channel(target) as channel:
        stub = h2probe_pb2_grpc.ProbeStub(channel)
        seen = Counter()
        results = Counter()
        for outcome in stub.Exchange(attempts(count, size), timeout=60):
            seen[outcome.id] += 1
            results[h2probe_pb2.Outcome.Result.Name(outcome.result)] += 1
        print(json.dumps({"outcomes": sum(seen.values()), "distinct": len(seen),
                          "twice": sum(1 for n in seen.values() if n > 1),
                          "results": results}))


if __name__ == "__main__":
    main()
