"""The official Python SDK client making `calls` calls of `echo`, each on a new client (a new
session), `concurrency` at a time, against `url` -- or, for `stdio:PROGRAM`, against a new
`PROGRAM --stdio` process per call (the SDK's stdio client); prints one JSON line: elapsed and
latencies. Used by `cargo xtask bench` (brain-bench) as a baseline. A fourth argument changes
what is measured: `cpu:WARM` -- WARM calls first, then the process's CPU time (user + system,
from the OS) per call over the `calls` calls after them; `inflight:SECONDS` -- `calls` calls of
`slow` (SECONDS long) at once, each on its own client, and the process's RSS while they are in
flight. Trust a private CA with SSL_CERT_FILE (httpx reads it)."""

import asyncio
import json
import resource
import sys
import time

from mcp import Client, StdioServerParameters


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1000
    return 0.0


async def main(url: str, calls: int, concurrency: int, mode: str) -> None:
    server = url
    if url.startswith("stdio:"):
        server = StdioServerParameters(command=url[len("stdio:"):], args=["--stdio"])
    latencies: list[float] = []
    next_call = 0

    async def once(name: str = "echo", arguments: dict | None = None) -> None:
        async with Client(server) as client:
            result = await client.call_tool(name, arguments or {"message": "hello"})
            if result.is_error:
                raise RuntimeError(f"{name} failed: {result}")

    async def run(total: int) -> None:
        nonlocal next_call
        next_call = 0

        async def worker() -> None:
            nonlocal next_call
            while next_call < total:
                next_call += 1
                started = time.perf_counter()
                await once()
                latencies.append((time.perf_counter() - started) * 1000)

        await asyncio.gather(*(worker() for _ in range(concurrency)))

    if mode.startswith("cpu:"):
        await run(int(mode[4:]))
        before = cpu_seconds()
        await run(calls)
        used = cpu_seconds() - before
        print(json.dumps({"cpu_us_per_call": used * 1e6 / calls}))
    elif mode.startswith("inflight:"):
        seconds = float(mode[9:])
        results = asyncio.gather(
            *(once("slow", {"seconds": seconds}) for _ in range(calls)), return_exceptions=True
        )
        await asyncio.sleep(seconds / 2)
        rss = rss_mb()
        done = await results
        errors = sum(1 for r in done if isinstance(r, BaseException))
        print(json.dumps({"rss_mb": rss, "errors": errors}))
    else:
        started = time.perf_counter()
        await run(calls)
        elapsed = (time.perf_counter() - started) * 1000
        print(json.dumps({"elapsed_ms": elapsed, "latencies_ms": latencies}))


if __name__ == "__main__":
    mode = sys.argv[4] if len(sys.argv) > 4 else ""
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), mode))
