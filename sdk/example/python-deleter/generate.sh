#!/usr/bin/env bash
# Generates the Python code of the example plugin into plugin/gen:
# messages with protoc --python_out (the system protoc, whose output both
# the C++ and the upb protobuf runtimes load), gRPC service stubs with
# Debian's python3-grpc-tools (python3 -m grpc_tools.protoc
# --grpc_python_out). `make proto-python` runs it; `make proto-check`
# fails when the committed code is stale.
#
#   generate.sh [OUTDIR]   (default plugin/gen)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${1:-$here/plugin/gen}
py=/usr/bin/python3 # Debian's, where python3-grpc-tools installs
protos=(lifecycled/plugin/v1/plugin.proto grpc_health/v1/health.proto rpc_status/status.proto)
services=(lifecycled/plugin/v1/plugin.proto grpc_health/v1/health.proto)
mkdir -p "$out"
protoc -I "$root/sdk/proto" -I "$here/proto" --python_out="$out" "${protos[@]}"
"$py" -m grpc_tools.protoc -I "$root/sdk/proto" -I "$here/proto" --grpc_python_out="$out" "${services[@]}"
# Packages, so that the modules import as lifecycled.plugin.v1.plugin_pb2.
for d in $(cd "$out" && find . -type d); do
  [ -f "$out/$d/__init__.py" ] || : >"$out/$d/__init__.py"
done
