"""A stock grpcio server whose connections have a maximum age (gRPC's
MAX_CONNECTION_AGE: each connection is sent GOAWAY after it, as grpc-go's
MaxConnectionAge does), answering every unary call with an empty message.

Usage: aging_server.py AGE_MS SECONDS. Prints "listening PORT" once it
listens on 127.0.0.1, serves for SECONDS, then prints "calls N" (the calls
its handler answered) and exits.
"""

import sys
import threading
import time
from concurrent import futures

import grpc

calls = 0
lock = threading.Lock()


def answer(request, context):
    global calls
    with lock:
        calls += 1
    return b""


class AnyMethod(grpc.GenericRpcHandler):
    def service(self, handler_call_details):
        return grpc.unary_unary_rpc_method_handler(answer)


def main():
    age_ms, seconds = int(sys.argv[1]), float(sys.argv[2])
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=8),
        options=[
            ("grpc.max_connection_age_ms", age_ms),
            ("grpc.max_connection_age_grace_ms", 1000),
        ],
    )
    server.add_generic_rpc_handlers((AnyMethod(),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"listening {port}", flush=True)
    time.sleep(seconds)
    server.stop(grace=1).wait()
    print(f"calls {calls}", flush=True)


if __name__ == "__main__":
    main()
