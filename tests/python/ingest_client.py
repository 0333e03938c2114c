"""A stock Python grpcio client-streaming call against h2probe's server.

Usage: ingest_client.py STUBS_DIR HOST:PORT COUNT PAYLOAD_BYTES
Prints one JSON line with the reply's counts.
"""
import json
import sys

sys.path.insert(0, sys.argv[1])
import grpc  # noqa: E402
import h2probe_pb2  # noqa: E402
import h2probe_pb2_grpc  # noqa: E402


def items(count, size):
    payload = bytes(i % 251 for i in range(size))
    for seq in range(count):
        yield h2probe_pb2.Item(seq=seq, scheduled_ns=0, payload=payload)


def main():
    target, count, size = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    with grpc.insecure_channel(target) as channel:
        stub = h2probe_pb2_grpc.ProbeStub(channel)
        reply = stub.Ingest(items(count, size), timeout=60)
        print(json.dumps({"received": reply.received, "completed": reply.completed,
                          "discarded": reply.discarded, "received_bytes": reply.received_bytes}))
        # An unknown method is UNIMPLEMENTED for this stock client too.
        try:
            channel.stream_unary("/h2probe.v1.Probe/Nope")(iter([b""]), timeout=10)
            print(json.dumps({"unknown_method": "OK?"}))
        except grpc.RpcError as e:
            print(json.dumps({"unknown_method": e.code().name}))


if __name__ == "__main__":
    main()
