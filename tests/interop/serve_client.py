"""The Python SDK's client (mcp 2.3.0) against `brain-harness serve`: runs the steps of a plan and
prints one JSON line per step.

    serve_client.py PLAN_JSON

PLAN: {"url": "http://127.0.0.1:PORT/mcp", "token": "…"} or {"command": ["brain-harness", …]},
"mode": "legacy" (the initialize handshake, a 2025 session) or "auto" (server/discover, 2026-07-28),
"steps": [{"list": true}, {"call": NAME, "arguments": {…}, "meta": {…}, "progress": true},
{"parallel": [STEP, …]}, {"sleep": SECONDS}, …] (a parallel step runs its calls at once and prints
their lines in order). A call step with "cancel_after": SECONDS is cancelled then (the SDK tells
the server as its revision says) and prints {"cancelled": true}.

The first line is {"protocol_version": REVISION} (what the client negotiated). A list step prints {"tools": [Tool, …]}; a call step prints {"result": CallToolResult, "progress":
[[progress, total, message], …]}; a step that fails prints {"error": message, "code": code, "data": data}.
"""

import asyncio
import json
import sys

import httpx2
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError


def transport(plan):
    if "command" in plan:
        command = plan["command"]
        return StdioServerParameters(command=command[0], args=command[1:], env=plan.get("env"))
    headers = {}
    if plan.get("token") is not None:
        headers["Authorization"] = f"Bearer {plan['token']}"
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60.0))
    # "terminate": false leaves the session open at exit (no DELETE), for a server that is gone.
    return streamable_http_client(plan["url"], http_client=http, terminate_on_close=plan.get("terminate", True))


async def step_line(client, step):
    try:
        if "sleep" in step:
            await asyncio.sleep(step["sleep"])
            return {"slept": step["sleep"]}
        if "cancel_after" in step:
            call = step_line(client, {k: v for k, v in step.items() if k != "cancel_after"})
            try:
                return await asyncio.wait_for(call, step["cancel_after"])
            except asyncio.TimeoutError:
                return {"cancelled": True}
        if step.get("list"):
            listed = await client.list_tools()
            return {"tools": [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in listed.tools]}
        progress = []

        async def on_progress(value, total, message):
            progress.append([value, total, message])

        result = await client.call_tool(
            step["call"],
            step.get("arguments", {}),
            progress_callback=on_progress if step.get("progress") else None,
            meta=step.get("meta"),
        )
        return {"result": result.model_dump(by_alias=True, mode="json", exclude_none=True), "progress": progress}
    except MCPError as error:
        return {"error": str(error), "code": error.error.code, "data": error.error.data}


async def run(plan):
    async with Client(transport(plan), mode=plan.get("mode", "auto"), cache=None) as client:
        print(json.dumps({"protocol_version": client.protocol_version}), flush=True)
        for step in plan["steps"]:
            if "parallel" in step:
                lines = await asyncio.gather(*(step_line(client, s) for s in step["parallel"]))
            else:
                lines = [await step_line(client, step)]
            for line in lines:
                print(json.dumps(line), flush=True)


if __name__ == "__main__":
    asyncio.run(run(json.loads(sys.argv[1])))
