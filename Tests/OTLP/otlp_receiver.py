#!/usr/bin/env python3
"""A small OTLP/HTTP receiver for the telemetry tests: decodes what an exporter sends with the official schema
(PyPI's opentelemetry-proto, generated from open-telemetry/opentelemetry-proto) and writes one JSON line per request.

  otlp_receiver.py --listen 127.0.0.1:PORT --out FILE

Accepts POST /v1/traces and /v1/metrics in both OTLP/HTTP encodings (application/x-protobuf and application/json,
gzip or not) and answers as a collector does: 200 with the empty Export...ServiceResponse in the request's encoding.
Anything else gets 404 or 415, and a body that does not decode gets 400 (a line with "error" is written), so a test
sees an exporter that sends something other than OTLP. Each line: {"path", "contentType", "request"}, the request
as the protobuf JSON mapping. Stops on SIGTERM.
"""
import argparse
import gzip
import json
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf import json_format
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

KINDS = {
    "/v1/traces": (trace_service_pb2.ExportTraceServiceRequest, trace_service_pb2.ExportTraceServiceResponse),
    "/v1/metrics": (metrics_service_pb2.ExportMetricsServiceRequest, metrics_service_pb2.ExportMetricsServiceResponse),
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--listen", required=True)
    parser.add_argument("--out", required=True)
    arguments = parser.parse_args()
    host, port = arguments.listen.rsplit(":", 1)
    out = open(arguments.out, "a", encoding="utf-8")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def answer(self, status, body=b"", content_type="text/plain"):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def write(self, line):
            out.write(json.dumps(line) + "\n")
            out.flush()

        def do_POST(self):
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            if self.path not in KINDS:
                self.answer(404)
                return
            request_type, response_type = KINDS[self.path]
            content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            try:
                if (self.headers.get("Content-Encoding") or "").lower() == "gzip":
                    body = gzip.decompress(body)
                request = request_type()
                if content_type == "application/x-protobuf":
                    request.ParseFromString(body)
                    response = response_type().SerializeToString()
                elif content_type == "application/json":
                    json_format.Parse(body.decode("utf-8"), request)
                    response = json_format.MessageToJson(response_type()).encode()
                else:
                    self.write({"path": self.path, "contentType": content_type, "error": "unsupported media type"})
                    self.answer(415)
                    return
            except Exception as error:  # a body that is not the schema's message
                self.write({"path": self.path, "contentType": content_type, "error": str(error)})
                self.answer(400)
                return
            self.write({"path": self.path, "contentType": content_type,
                        "request": json_format.MessageToDict(request)})
            self.answer(200, response, content_type)

    server = ThreadingHTTPServer((host, int(port)), Handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"listening on {host}:{port}", flush=True)
    try:
        server.serve_forever()
    finally:
        out.close()


if __name__ == "__main__":
    main()
