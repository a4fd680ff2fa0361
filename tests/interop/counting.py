"""An ASGI wrapper for brain's interop servers: counts the JSON-RPC `tools/call` requests that
arrive (the at-most-once counter the tests read), every request by HTTP version, and the client
connections they came on (distinct client addresses), and the `tools/call` requests running at
once (from arrival to the end of their response; the most at any moment is `peak_running`), and
serves them at `GET /stats` as `{"calls": N, "requests": {"1.1": N, "2": N}, "connections": N,
"running": N, "peak_running": N, "origins": [{"client": "HOST:PORT", "token": T}]}` (`origins`:
each `tools/call` with a bearer token: its connection and the token, in order). Everything else
passes through unchanged (the body is replayed as received)."""

import json


class CountToolCalls:
    def __init__(self, app, extra=None):
        self.app = app
        # A function whose dict is added to /stats (python_server.py's identities and tokens).
        self.extra = extra
        self.calls = 0
        self.requests = {}
        self.clients = set()
        self.running = 0
        self.peak_running = 0
        # Each `tools/call`'s connection (the client's address) and bearer token, in order.
        self.origins = []

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if scope["method"] == "GET" and scope["path"] == "/stats":
            body = json.dumps({"calls": self.calls, "requests": self.requests,
                               "connections": len(self.clients), "running": self.running,
                               "peak_running": self.peak_running, "origins": self.origins,
                               **(self.extra() if self.extra else {})}).encode()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": body})
            return
        version = scope.get("http_version", "1.1")
        self.requests[version] = self.requests.get(version, 0) + 1
        if scope.get("client"):
            self.clients.add(tuple(scope["client"]))
        if scope["method"] != "POST":
            return await self.app(scope, receive, send)
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        try:
            parsed = json.loads(body)
            messages = parsed if isinstance(parsed, list) else [parsed]
            calls = sum(1 for m in messages if isinstance(m, dict) and m.get("method") == "tools/call")
        except ValueError:
            calls = 0
        self.calls += calls
        bearer = dict(scope.get("headers", [])).get(b"authorization")
        if calls and bearer:
            client = scope.get("client") or ("", 0)
            self.origins.append({"client": f"{client[0]}:{client[1]}",
                                 "token": bearer.decode(errors="replace").removeprefix("Bearer ")})
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        if not calls:
            return await self.app(scope, replay, send)
        self.running += calls
        self.peak_running = max(self.peak_running, self.running)
        ended = False

        def end():
            nonlocal ended
            if not ended:
                ended = True
                self.running -= calls

        async def sending(message):
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                end()
            await send(message)

        try:
            return await self.app(scope, replay, sending)
        finally:
            end()
