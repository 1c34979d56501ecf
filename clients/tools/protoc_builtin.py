"""A protoc plugin that runs one of grpcio-tools' built-in generators.

buf runs protoc plugins; grpcio-tools ships its Python generators (python,
pyi, grpc_python) inside its protoc, not as plugins. This script is the plugin:
buf.gen.yaml names it as `local: [python3, clients/tools/protoc_builtin.py, NAME]`,
and it hands buf's request to `grpc_tools.protoc --NAME_out` and the files that
writes back to buf. deploy/clients.sh runs buf with its virtualenv's python3
first on PATH (docs/clients.md).
"""

import os
import sys
import tempfile

from google.protobuf import descriptor_pb2
from google.protobuf.compiler import plugin_pb2
from grpc_tools import protoc


def main() -> int:
    name = sys.argv[1]
    request = plugin_pb2.CodeGeneratorRequest.FromString(sys.stdin.buffer.read())
    response = plugin_pb2.CodeGeneratorResponse()
    with tempfile.TemporaryDirectory() as tmp:
        descriptors = os.path.join(tmp, "descriptors.pb")
        with open(descriptors, "wb") as f:
            files = descriptor_pb2.FileDescriptorSet(file=request.proto_file)
            f.write(files.SerializeToString())
        out = os.path.join(tmp, "out")
        os.mkdir(out)
        option = f"--{name}_out={request.parameter}:{out}" if request.parameter else f"--{name}_out={out}"
        args = ["protoc", f"--descriptor_set_in={descriptors}", option, *request.file_to_generate]
        if protoc.main(args) != 0:
            response.error = f"grpc_tools.protoc {option} failed"
        else:
            for root, _, names in os.walk(out):
                for file_name in sorted(names):
                    path = os.path.join(root, file_name)
                    with open(path, encoding="utf-8") as f:
                        response.file.add(name=os.path.relpath(path, out), content=f.read())
    response.supported_features = plugin_pb2.CodeGeneratorResponse.FEATURE_PROTO3_OPTIONAL
    sys.stdout.buffer.write(response.SerializeToString())
    return 0


if __name__ == "__main__":
    sys.exit(main())
