#!/usr/bin/env python3
"""Captures one MCP server's `tools/list` answer, as the server sent it, into a corpus fixture.

    capture.py NAME SOURCE -- COMMAND [ARG...]     # a stdio server, started and stopped here
    capture.py NAME SOURCE --url http://127.0.0.1:PORT/mcp

NAME names the fixture (`NAME.json` beside this script); SOURCE says where the server came from
(`npm:@modelcontextprotocol/server-memory@2026.1.26`), so that the fixture can be captured again.
Every page of `tools/list` is read; the tools are written unchanged, in the server's order. Only
the standard library: run it with any Python 3.
"""

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

REVISION = "2025-11-25"
INITIALIZE = {
    "protocolVersion": REVISION,
    "capabilities": {},
    "clientInfo": {"name": "brain-corpus-capture", "version": "1"},
}


class Stdio:
    def __init__(self, command):
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        self.next_id = 0

    def send(self, message):
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def request(self, method, params):
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            line = self.process.stdout.readline()
            if not line:
                sys.exit(f"the server exited before answering {method}")
            message = json.loads(line)
            if message.get("id") == self.next_id and "method" not in message:
                return answer(method, message)

    def notify(self, method):
        self.send({"jsonrpc": "2.0", "method": method})

    def close(self):
        self.process.stdin.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()


class Http:
    def __init__(self, url):
        self.url = url
        self.session = None
        self.next_id = 0

    def post(self, message):
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": REVISION,
        }
        if self.session:
            headers["mcp-session-id"] = self.session
        request = urllib.request.Request(self.url, json.dumps(message).encode(), headers)
        with urllib.request.urlopen(request, timeout=30) as response:
            self.session = response.headers.get("mcp-session-id", self.session)
            body = response.read().decode()
            kind = response.headers.get("content-type", "")
        if "text/event-stream" in kind:
            messages = [
                json.loads(line[5:])
                for line in body.splitlines()
                if line.startswith("data:") and line[5:].strip()
            ]
        else:
            messages = [json.loads(body)] if body.strip() else []
        return messages

    def request(self, method, params):
        self.next_id += 1
        for message in self.post(
            {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        ):
            if message.get("id") == self.next_id and "method" not in message:
                return answer(method, message)
        sys.exit(f"no answer to {method}")

    def notify(self, method):
        self.post({"jsonrpc": "2.0", "method": method})

    def close(self):
        if self.session:
            request = urllib.request.Request(
                self.url, method="DELETE", headers={"mcp-session-id": self.session}
            )
            try:
                urllib.request.urlopen(request, timeout=5).close()
            except OSError:
                pass


def answer(method, message):
    if "error" in message:
        sys.exit(f"{method} failed: {message['error']}")
    return message["result"]


def main():
    args = sys.argv[1:]
    if len(args) < 4 or args[2] not in ("--", "--url"):
        sys.exit(__doc__)
    name, source = args[0], args[1]
    if args[2] == "--url":
        peer, where = Http(args[3]), {"url": args[3]}
    else:
        peer, where = Stdio(args[3:]), {"command": args[3:]}
    initialized = peer.request("initialize", INITIALIZE)
    peer.notify("notifications/initialized")
    tools, cursor = [], None
    while True:
        page = peer.request("tools/list", {"cursor": cursor} if cursor else {})
        tools.extend(page["tools"])
        cursor = page.get("nextCursor")
        if not cursor:
            break
    peer.close()
    fixture = {
        "server": initialized.get("serverInfo", {}),
        "source": source,
        **where,
        "protocolVersion": initialized["protocolVersion"],
        "tools": tools,
    }
    out = Path(__file__).with_name(f"{name}.json")
    out.write_text(json.dumps(fixture, indent=2, ensure_ascii=False) + "\n")
    print(f"{out.name}: {len(tools)} tools from {fixture['server'].get('name')} "
          f"{fixture['server'].get('version')} at {fixture['protocolVersion']}")


if __name__ == "__main__":
    main()
