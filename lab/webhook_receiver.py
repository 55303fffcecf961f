#!/usr/bin/env python3
"""The lab's alert receiver: an Alertmanager webhook endpoint that appends every notification
(Alertmanager's webhook JSON, with the time it arrived) as one line to a file. It runs on the lab's
control plane (tests/integration/test_alerting.py starts it there with systemd-run); the
monitoring hosts' Alertmanagers send to it over the lab network (monitoring_server_receivers in
lab/inventory_vars/rackforge.yml).

    webhook_receiver.py --listen 10.89.77.10 --port 9095 --out /var/lib/lab-webhook/alerts.jsonl
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--out", required=True)
    opts = ap.parse_args()
    os.makedirs(os.path.dirname(opts.out), exist_ok=True)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                doc = json.loads(body)
            except ValueError:
                self.send_response(400)
                self.end_headers()
                return
            with open(opts.out, "a") as fh:
                fh.write(json.dumps({"received_at": time.time(), "path": self.path, "body": doc}) + "\n")
            self.send_response(200)
            self.end_headers()

        def log_message(self, *_args):
            pass

    http.server.ThreadingHTTPServer((opts.listen, opts.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
