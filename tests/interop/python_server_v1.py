"""An MCP server on an older official Python SDK (mcp 1.x), for brain's interop tests of older
protocol revisions: mcp 1.9.4 (in .venv-mcp1.9) negotiates 2025-03-26, mcp 1.12.4
(in .venv-mcp1.12) 2025-06-18. The same script runs on both.

Usage: python python_server_v1.py PORT
Serves Streamable HTTP on http://127.0.0.1:PORT/mcp (mcp 1.9 mounts it at /mcp/ and answers /mcp
with a redirect, which brain never follows: its URL is /mcp/), with sessions, and the number of
`tools/call` requests that arrived at http://127.0.0.1:PORT/stats. Writes `cancelled slow` to
stderr when a `slow` call is cancelled.
"""

import asyncio
import base64
import sys
from typing import TypedDict

import uvicorn
from pydantic import BaseModel

from mcp.server.fastmcp import Context, FastMCP, Image
from mcp.server.fastmcp.exceptions import ToolError

from counting import CountToolCalls

server = FastMCP("brain-interop-python-v1")

TINY_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


class Weather(TypedDict):
    city: str
    temperature: float


@server.tool()
def echo(message: str) -> str:
    """Echo a message back."""
    return message


@server.tool()
async def progress(steps: int, ctx: Context) -> str:
    """Report progress `steps` times, then finish. On these releases `ctx.report_progress` names
    no related request, so the notifications go to the session's GET stream, not the call's.

    The notifications and the result travel on two connections, and two races of the server
    can lose them on a busy machine, whatever the client does: these releases answer the GET
    with its 200 before the stream is registered (sse-starlette sends the headers while the task
    that registers it has not run yet) and drop a notification sent in between; and the result,
    on the call's own stream, can overtake notifications still queued for the GET stream (a
    client cannot know that progress is still coming). The pauses let the server's tasks run, so
    that what the test counts is brain's side: that it listens, and reads what arrives there."""
    await asyncio.sleep(0.2)
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}/{steps}")
    await asyncio.sleep(0.2)
    return f"done {steps} steps"


@server.tool()
def weather(city: str) -> Weather:
    """Weather for a city: structuredContent from 1.10 on (output schema from the TypedDict);
    JSON text only on 1.9."""
    return {"city": city, "temperature": 21.5}


@server.tool()
def image() -> Image:
    """A 1x1 PNG."""
    return Image(data=TINY_PNG, format="png")


@server.tool()
def fail() -> str:
    """Always fails: the SDK turns any exception into a result with isError true."""
    raise ToolError("the tool failed")


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep for `seconds`; says so on stderr when cancelled."""
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        print("cancelled slow", file=sys.stderr, flush=True)
        raise
    return "slept"


if hasattr(Context, "elicit"):  # elicitation came with 2025-06-18 (mcp 1.10); 1.9 has none

    class Approval(BaseModel):
        ok: bool

    @server.tool()
    async def elicit(ctx: Context) -> str:
        """Asks the user for approval."""
        answer = await ctx.elicit("Approve?", Approval)
        return f"elicited: {answer.action}"


if __name__ == "__main__":
    port = int(sys.argv[1])
    app = CountToolCalls(server.streamable_http_app())
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
