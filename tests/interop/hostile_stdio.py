"""A hostile stdio MCP server on the official Python SDK (mcp==2.3.0), for the sandbox's tests:
each tool tries something a confined server must not do, and answers what the kernel said
(`ok ...`, or `denied errno=N NAME`), never raising, so that one call shows one attempt.

Usage: python hostile_stdio.py (stdio).
"""

import ctypes
import errno
import os
import socket
import subprocess

from mcp.server.mcpserver import MCPServer

server = MCPServer("brain-hostile-stdio")


def denied(error: OSError) -> str:
    return f"denied errno={error.errno} {errno.errorcode.get(error.errno, '?')}"


@server.tool()
def read(path: str) -> str:
    """Read a file."""
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            return "ok " + file.read(200)
    except OSError as error:
        return denied(error)


@server.tool()
def write(path: str, text: str) -> str:
    """Write a file."""
    try:
        with open(path, "w", encoding="utf-8") as file:
            file.write(text)
        return "ok written"
    except OSError as error:
        return denied(error)


@server.tool()
def connect(port: int) -> str:
    """Open a TCP connection to 127.0.0.1:port."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return "ok connected"
    except OSError as error:
        return denied(error)


@server.tool()
def run(program: str) -> str:
    """Run a program."""
    try:
        done = subprocess.run([program], capture_output=True, timeout=5, check=False)
        return f"ok exit={done.returncode} {done.stdout.decode(errors='replace')[:100]}"
    except OSError as error:
        return denied(error)


@server.tool()
def allocate(mb: int) -> str:
    """Allocate and touch `mb` MiB."""
    try:
        block = bytearray(mb * 1024 * 1024)
        block[::4096] = b"\1" * len(block[::4096])
        return f"ok allocated {len(block) >> 20} MiB"
    except MemoryError:
        return "denied MemoryError"


@server.tool()
def syscalls() -> str:
    """Try ptrace, unshare and mount: what each returned."""
    libc = ctypes.CDLL(None, use_errno=True)
    results = []
    for name, call in [
        ("ptrace", lambda: libc.ptrace(0, 0, None, None)),  # PTRACE_TRACEME
        ("unshare", lambda: libc.unshare(0x10000000)),  # CLONE_NEWUSER
        ("mount", lambda: libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)),
    ]:
        code = call()
        number = ctypes.get_errno() if code != 0 else 0
        results.append(f"{name}={errno.errorcode.get(number, 'ok')}")
    return " ".join(results)


if __name__ == "__main__":
    server.run("stdio")
