"""The go-plugin side of a lifecycled plugin written in Python.

lifecycled starts plugins with hashicorp/go-plugin. A plugin in any language
must do what go-plugin's Go server does; docs/plugin-protocol.md says why
each step is needed. This module does all of it, so that a plugin only
registers its service:

    goplugin.serve(lambda server: plugin_pb2_grpc.add_TenantDeleterServicer_to_server(MyDeleter(), server))

- check the magic cookie (LIFECYCLED_PLUGIN) so that the program refuses to
  run when started by hand;
- pick the protocol version from PLUGIN_PROTOCOL_VERSIONS;
- mutual TLS: trust only the certificate the daemon passed in
  PLUGIN_CLIENT_CERT, present a fresh self-signed certificate for
  "localhost", and print it (DER, base64 without padding) in the handshake;
- serve grpc.health.v1.Health reporting "plugin" as SERVING, and
  plugin.GRPCController/Shutdown, which ends the process;
- print the handshake line on stdout, and log hclog JSON lines on stderr.
"""

import base64
import datetime
import json
import os
import signal
import sys
import threading
from concurrent import futures

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gen"))

from grpc_health.v1 import health_pb2, health_pb2_grpc  # noqa: E402
from lifecycled.plugin.v1 import plugin_pb2  # noqa: E402
from rpc_status import status_pb2  # noqa: E402

MAGIC_COOKIE_KEY = "LIFECYCLED_PLUGIN"
MAGIC_COOKIE_VALUE = "d6f1c2a7-lifecycled-plugin-v1"
CORE_PROTOCOL_VERSION = 1  # go-plugin's own, always 1
MAX_MESSAGE_BYTES_ENV = "LIFECYCLED_PLUGIN_MAX_MESSAGE_BYTES"
DEFAULT_MAX_MESSAGE_BYTES = 64 << 20


class Logger:
    """hclog JSON lines on stderr. go-plugin reads @level, @message and
    @timestamp (in exactly this format) and shows the line in the daemon's
    log under the plugin's name; other keys become fields. Registered
    secrets are replaced before a line is written: no SDK does it here."""

    def __init__(self):
        self._secrets = []
        self._lock = threading.Lock()

    def add_secret(self, value):
        if value and len(value) >= 4:
            with self._lock:
                self._secrets.append(value)
                self._secrets.sort(key=len, reverse=True)

    def scrub(self, text):
        with self._lock:
            for s in self._secrets:
                text = text.replace(s, "REDACTED")
        return text

    def log(self, level, message, **fields):
        now = datetime.datetime.now(datetime.timezone.utc)
        entry = {"@level": level, "@message": message, "@timestamp": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "@module": "python"}
        entry.update(fields)
        line = self.scrub(json.dumps(entry, default=str))
        with self._lock:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()

    def info(self, message, **fields):
        self.log("info", message, **fields)

    def warn(self, message, **fields):
        self.log("warn", message, **fields)

    def error(self, message, **fields):
        self.log("error", message, **fields)


log = Logger()


class PluginError(Exception):
    """An error that crosses to the daemon with its meaning: a gRPC status
    whose details hold a lifecycled.plugin.v1.ErrorInfo (class, code, field
    problems, partial count)."""

    # ErrorInfo.Code -> the gRPC code the Go SDK uses for it (sdk/status.go).
    GRPC_CODES = {
        plugin_pb2.ErrorInfo.CODE_INVALID_CONFIG: grpc.StatusCode.INVALID_ARGUMENT,
        plugin_pb2.ErrorInfo.CODE_INVALID_ARGUMENT: grpc.StatusCode.INVALID_ARGUMENT,
        plugin_pb2.ErrorInfo.CODE_NOT_FOUND: grpc.StatusCode.NOT_FOUND,
        plugin_pb2.ErrorInfo.CODE_UNSUPPORTED: grpc.StatusCode.UNIMPLEMENTED,
        plugin_pb2.ErrorInfo.CODE_UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
        plugin_pb2.ErrorInfo.CODE_INTERNAL: grpc.StatusCode.INTERNAL,
        plugin_pb2.ErrorInfo.CODE_CANCELED: grpc.StatusCode.CANCELLED,
    }

    def __init__(self, message, code, retryable, fields=(), deleted=None, retry_after_ms=0):
        super().__init__(message)
        self.message = message
        self.code = code
        self.retryable = retryable
        self.fields = list(fields)
        self.deleted = deleted
        self.retry_after_ms = retry_after_ms

    def partial(self, deleted):
        """The same error, after deleting `deleted` items (a failed Delete)."""
        self.deleted = deleted
        return self

    def status(self):
        info = plugin_pb2.ErrorInfo(
            code=self.code,
            retry_after_ms=self.retry_after_ms,
            has_deleted=self.deleted is not None,
            deleted=self.deleted or 0,
        )
        setattr(info, "class", plugin_pb2.ErrorInfo.CLASS_RETRYABLE if self.retryable else plugin_pb2.ErrorInfo.CLASS_PERMANENT)
        for field, problem in self.fields:
            info.field_errors.add(field=log.scrub(field), problem=log.scrub(problem))
        code = self.GRPC_CODES.get(self.code, grpc.StatusCode.UNKNOWN)
        message = log.scrub(self.message)
        st = status_pb2.Status(code=code.value[0], message=message)
        st.details.add(type_url="type.googleapis.com/lifecycled.plugin.v1.ErrorInfo", value=info.SerializeToString())
        return _Status(code, message, (("grpc-status-details-bin", st.SerializeToString()),))


class _Status(grpc.Status):
    def __init__(self, code, details, trailing_metadata):
        self.code = code
        self.details = details
        self.trailing_metadata = trailing_metadata


def invalid_config(*fields):
    """fields: (field, problem) pairs, one per problem."""
    text = "; ".join(f"{f}: {p}" for f, p in fields)
    return PluginError("invalid config: " + text, plugin_pb2.ErrorInfo.CODE_INVALID_CONFIG, False, fields)


def plan_changed(checked, now):
    """Delete's refusal when the daemon's checked plan fingerprint is not the
    current one (sdk.PlanChanged): permanent, code invalid config."""
    return PluginError(f"the plan changed between the daemon's plan check and Delete (checked fingerprint {checked}, now {now}); "
                       "nothing was deleted", plugin_pb2.ErrorInfo.CODE_INVALID_CONFIG, False)


def invalid_argument(message):
    return PluginError(message, plugin_pb2.ErrorInfo.CODE_INVALID_ARGUMENT, False)


def unavailable(message):
    return PluginError(message, plugin_pb2.ErrorInfo.CODE_UNAVAILABLE, True)


def canceled():
    return PluginError("canceled", plugin_pb2.ErrorInfo.CODE_CANCELED, True)


def internal(message):
    # Like the Go SDK: an unclassified failure is retryable, because a
    # deletion that might succeed must not be given up on.
    return PluginError(message, plugin_pb2.ErrorInfo.CODE_INTERNAL, True)


def abort(context, err):
    """Ends the call with err (a PluginError) as its status."""
    if not isinstance(err, PluginError):
        err = internal(str(err))
    context.abort_with_status(err.status())


class _Health(health_pb2_grpc.HealthServicer):
    """go-plugin's client checks the service "plugin" before every use."""

    def Check(self, request, context):
        if request.service in ("", "plugin"):
            return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)
        context.abort(grpc.StatusCode.NOT_FOUND, "unknown service " + request.service)


def _controller(stop):
    """plugin.GRPCController/Shutdown, from go-plugin's grpc_controller.proto:
    Empty in, Empty out, so no generated code is needed. Without it the
    daemon waits two seconds at every stop and then kills the process."""

    def shutdown(request, context):
        log.info("shutdown requested by the daemon")
        stop.set()
        return b""

    handler = grpc.unary_unary_rpc_method_handler(shutdown, request_deserializer=lambda b: b, response_serializer=lambda b: b)
    return grpc.method_handlers_generic_handler("plugin.GRPCController", {"Shutdown": handler})


def _certificate():
    """A fresh key and self-signed certificate for "localhost", as go-plugin
    makes (it verifies the server name "localhost" against it)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(seconds=30))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(digital_signature=True, key_encipherment=True, key_cert_sign=True, content_commitment=False,
                          data_encipherment=False, key_agreement=True, crl_sign=False, encipher_only=False, decipher_only=False),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), key_pem, cert.public_bytes(serialization.Encoding.DER)


def _fail(message):
    sys.stderr.write(message + "\n")
    sys.exit(1)


def serve(register, versions=(1, 2)):
    """Serves the services register() adds, under the newest protocol
    version in `versions` that the daemon offers, until the daemon asks the
    plugin to shut down."""
    if os.environ.get(MAGIC_COOKIE_KEY) != MAGIC_COOKIE_VALUE:
        _fail("This is a lifecycled plugin: lifecycled starts it (see [[deleter]] in config.toml); it does nothing on its own.")
    offered = {int(v) for v in os.environ.get("PLUGIN_PROTOCOL_VERSIONS", "").split(",") if v.strip().isdigit()}
    common = sorted(offered & set(versions))
    if not common:
        # Answer with our newest: the daemon then says which versions it speaks.
        version = max(versions)
    else:
        version = common[-1]
    client_cert = os.environ.get("PLUGIN_CLIENT_CERT")
    if not client_cert:
        _fail("PLUGIN_CLIENT_CERT is not set: lifecycled always starts plugins with mutual TLS")
    cert_pem, key_pem, cert_der = _certificate()
    limit = DEFAULT_MAX_MESSAGE_BYTES
    try:
        n = int(os.environ.get(MAX_MESSAGE_BYTES_ENV, ""))
        if 4 << 20 <= n <= 1 << 30:
            limit = n
    except ValueError:
        pass
    # go-plugin plugins ignore Ctrl-C: the daemon stops them itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stop = threading.Event()
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=8),
        options=[("grpc.max_send_message_length", limit), ("grpc.max_receive_message_length", limit)],
    )
    register(server)
    health_pb2_grpc.add_HealthServicer_to_server(_Health(), server)
    server.add_generic_rpc_handlers((_controller(stop),))
    creds = grpc.ssl_server_credentials([(key_pem, cert_pem)], root_certificates=client_cert.encode(), require_client_auth=True)
    port = _bind(server, creds)
    server.start()
    cert = base64.b64encode(cert_der).decode().rstrip("=")  # RawStdEncoding: no padding
    sys.stdout.write(f"{CORE_PROTOCOL_VERSION}|{version}|tcp|127.0.0.1:{port}|grpc|{cert}\n")
    sys.stdout.flush()
    # Nothing else may go to stdout: go-plugin reads it only for this line.
    sys.stdout = sys.stderr
    log.info("plugin started", port=port, protocol=version)
    stop.wait()
    server.stop(grace=1).wait()


def _bind(server, creds):
    lo = int(os.environ.get("PLUGIN_MIN_PORT", "0") or 0)
    hi = int(os.environ.get("PLUGIN_MAX_PORT", "0") or 0)
    if lo > 0 and hi >= lo:
        for p in range(lo, hi + 1):
            try:
                return server.add_secure_port(f"127.0.0.1:{p}", creds)
            except RuntimeError:
                continue
        _fail(f"no free port between PLUGIN_MIN_PORT={lo} and PLUGIN_MAX_PORT={hi}")
    return server.add_secure_port("127.0.0.1:0", creds)
