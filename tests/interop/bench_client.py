"""The official Python SDK client making `calls` calls of `echo`, each on a new client (a new
session), `concurrency` at a time, against `url` -- or, for `stdio:PROGRAM`, against a new
`PROGRAM --stdio` process per call (the SDK's stdio client); prints one JSON line: elapsed and
latencies. Used by `cargo xtask bench` (brain-bench) as a baseline."""

import asyncio
import json
import sys
import time

from mcp import Client, StdioServerParameters


async def main(url: str, calls: int, concurrency: int) -> None:
    server = url
    if url.startswith("stdio:"):
        server = StdioServerParameters(command=url[len("stdio:"):], args=["--stdio"])
    latencies: list[float] = []
    next_call = 0

    async def worker() -> None:
        nonlocal next_call
        while next_call < calls:
            next_call += 1
            started = time.perf_counter()
            async with Client(server) as client:
                result = await client.call_tool("echo", {"message": "hello"})
                if result.is_error:
                    raise RuntimeError(f"echo failed: {result}")
            latencies.append((time.perf_counter() - started) * 1000)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = (time.perf_counter() - started) * 1000
    print(json.dumps({"elapsed_ms": elapsed, "latencies_ms": latencies}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
