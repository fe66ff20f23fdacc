"""The webhook that Alertmanager notifies in alert-run.sh: every POST body
(Alertmanager's webhook JSON) is appended, as one line, to --out, with the
time it arrived and the path it was sent to (the receiver's name, which
alert-bundle.py puts in each receiver's URL). Standard library only: the
GPU machine has nothing else.

    python3 alert-webhook.py --port 19095 --out notifications.jsonl
"""
import argparse
import http.server
import json
import time

p = argparse.ArgumentParser()
p.add_argument("--port", type=int, required=True)
p.add_argument("--out", required=True)
a = p.parse_args()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            payload = json.loads(body)
        except ValueError:
            payload = {"unparsed": body.decode("utf-8", "replace")}
        line = {"received": time.time(), "path": self.path, "body": payload}
        with open(a.out, "a") as f:
            f.write(json.dumps(line) + "\n")
        self.send_response(200)
        self.end_headers()

    def do_GET(self):
        # A readiness probe for the script.
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok\n")

    def log_message(self, fmt, *args):
        pass


http.server.HTTPServer(("127.0.0.1", a.port), Handler).serve_forever()
