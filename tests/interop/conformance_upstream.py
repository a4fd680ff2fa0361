"""The upstream of `cargo xtask conformance --server`: the tools the official conformance suite's
server scenarios call, on the official Python SDK's server (mcp==2.3.0), so that the suite can
test `brain-harness serve` in front of it.

Usage: python conformance_upstream.py PORT  (Streamable HTTP on http://127.0.0.1:PORT/mcp)

Each tool answers as the suite's scenario describes. brain converts text and images; the audio
and embedded-resource tools exist so that the suite sees what serve does with content it does
not convert (the call fails, as brain's spec says).
"""

import base64
import sys

import uvicorn

from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import AudioContent, EmbeddedResource, ImageContent, TextContent, TextResourceContents

server = MCPServer("brain-conformance-upstream")

RED_PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
WAV = base64.b64encode(b"RIFF$\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00D\xac\x00\x00\x88X\x01\x00\x02\x00\x10\x00data\x00\x00\x00\x00").decode()


@server.tool()
def test_simple_text() -> str:
    """Returns simple text content."""
    return "This is a simple text response for testing."


@server.tool()
def test_image_content() -> Image:
    """Returns image content."""
    return Image(data=RED_PIXEL, format="png")


@server.tool()
def test_audio_content() -> list:
    """Returns audio content."""
    return [AudioContent(type="audio", data=WAV, mimeType="audio/wav")]


@server.tool()
def test_embedded_resource() -> list:
    """Returns an embedded resource."""
    return [
        EmbeddedResource(
            type="resource",
            resource=TextResourceContents(
                uri="test://embedded-resource", mimeType="text/plain", text="This is an embedded resource content."
            ),
        )
    ]


@server.tool()
def test_multiple_content_types() -> list:
    """Returns text, image and an embedded resource."""
    return [
        TextContent(type="text", text="Multiple content types test:"),
        ImageContent(type="image", data=base64.b64encode(RED_PIXEL).decode(), mimeType="image/png"),
        EmbeddedResource(
            type="resource",
            resource=TextResourceContents(
                uri="test://mixed-content-resource", mimeType="application/json", text='{"test": "data", "value": 123}'
            ),
        ),
    ]


@server.tool()
def test_error_handling() -> str:
    """Always fails."""
    raise ToolError("This tool intentionally returns an error for testing")


@server.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0, 50, 100."""
    for value in (0, 50, 100):
        await ctx.report_progress(value, 100, f"{value}%")
    return "Progress complete"


@server.tool()
async def test_tool_with_logging(ctx: Context) -> str:
    """Sends three log messages."""
    for message in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await ctx.info(message)
    return "Logging complete"


if __name__ == "__main__":
    uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
