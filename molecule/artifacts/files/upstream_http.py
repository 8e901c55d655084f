#!/usr/bin/env python3
"""A tiny upstream for the artifacts scenario, started on the controller.

Serves one deterministic payload in several ways, and logs every request it
receives (including proxied ones) so the scenario can prove that an offline
converge sent nothing:

    GET /ok/<file>              the payload
    GET /corrupt/<file>         same length, different bytes (sha256 mismatch)
    GET /truncate/<file>        full Content-Length, then the connection closes mid-file
    GET /truncate-nolen/<file>  no Content-Length, half the payload, then close
    anything else, CONNECT      logged, 502 (it is also the "proxy" of the offline converge)

It exits by itself after --lifetime seconds, so a failed run leaves nothing behind.
"""

import argparse
import hashlib
import http.server
import os
import threading


def payload(size):
    out = bytearray()
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(b"mncluster-artifacts-%d" % counter).digest()
        counter += 1
    return bytes(out[:size])


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    data = b""
    log_path = ""

    def _log(self):
        with open(self.log_path, "a", encoding="utf-8") as handle:
            handle.write(f"{self.command} {self.path}\n")

    def log_message(self, *args):  # keep stderr quiet
        pass

    def do_CONNECT(self):
        self._log()
        self.send_error(502, "offline test: no network here")

    def do_GET(self):
        self._log()
        kind = self.path.lstrip("/").split("/", 1)[0]
        data = self.data
        if kind == "ok":
            self._send(data, len(data))
        elif kind == "corrupt":
            self._send(bytes(b ^ 0xFF for b in data), len(data))
        elif kind == "truncate":
            self._send(data[: len(data) // 2], len(data))
        elif kind == "truncate-nolen":
            self._send(data[: len(data) // 2], None)
        else:
            self.send_error(502, "offline test: no network here")

    def _send(self, body, length):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        if length is not None:
            self.send_header("Content-Length", str(length))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        self.close_connection = True


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--size", type=int, default=2 * 1024 * 1024)
    parser.add_argument("--log", required=True)
    parser.add_argument("--pidfile", required=True)
    parser.add_argument("--lifetime", type=int, default=600)
    args = parser.parse_args()
    Handler.data = payload(args.size)
    Handler.log_path = args.log
    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    with open(args.pidfile, "w", encoding="utf-8") as handle:
        handle.write(f"{os.getpid()}\n")
    threading.Timer(args.lifetime, server.shutdown).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
