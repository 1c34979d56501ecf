#!/usr/bin/env python3
"""Call any dialectic RPC with the stock gRPC Python client, through server
reflection (no .proto files, no generated code), the way grpcurl does:

    pip install grpcio grpcio-reflection protobuf
    python3 deploy/grpc_call.py 127.0.0.1:7051 dialectic.v1.DialecticService/ListProjects '{"page_size": 5}'

The API key comes from DIALECTIC_API_KEY (sent as `authorization: Bearer …`).
Request and answers are JSON (protobuf's JSON mapping); a server stream
prints one JSON document per message.
"""
import json
import os
import sys

import grpc
from google.protobuf import descriptor_pool, json_format, message_factory
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    address, method = sys.argv[1], sys.argv[2]
    body = sys.argv[3] if len(sys.argv) > 3 else "{}"
    service_name, method_name = method.rsplit("/", 1)
    channel = grpc.insecure_channel(address)
    pool = descriptor_pool.DescriptorPool(ProtoReflectionDescriptorDatabase(channel))
    rpc = pool.FindServiceByName(service_name).FindMethodByName(method_name)
    request_class = message_factory.GetMessageClass(rpc.input_type)
    response_class = message_factory.GetMessageClass(rpc.output_type)
    request = json_format.Parse(body, request_class())
    path = f"/{service_name}/{method_name}"
    metadata = []
    if os.environ.get("DIALECTIC_API_KEY"):
        metadata.append(("authorization", f"Bearer {os.environ['DIALECTIC_API_KEY']}"))
    kwargs = dict(
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=response_class.FromString,
    )
    try:
        if rpc.server_streaming:
            call = channel.unary_stream(path, **kwargs)
            for answer in call(request, metadata=metadata):
                print(json.dumps(json_format.MessageToDict(answer)))
        else:
            call = channel.unary_unary(path, **kwargs)
            print(json.dumps(json_format.MessageToDict(call(request, metadata=metadata)), indent=2))
    except grpc.RpcError as e:
        print(f"{e.code().name}: {e.details()}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
