"""Counts a stdio MCP server's requests at its door: `counting_stdio.py STATS COMMAND...` runs
COMMAND with this process's stdout and stderr, forwards stdin to it line by line, and appends
each message's `method` to STATS, one a line, before the server reads it. The tests read STATS
with `tests::stdio::count`."""

import json
import subprocess
import sys


def main() -> int:
    stats, command = sys.argv[1], sys.argv[2:]
    child = subprocess.Popen(command, stdin=subprocess.PIPE)
    with open(stats, "a", encoding="utf-8") as out:
        for line in sys.stdin.buffer:
            try:
                method = json.loads(line).get("method")
            except ValueError:
                method = None
            if method:
                out.write(method + "\n")
                out.flush()
            try:
                child.stdin.write(line)
                child.stdin.flush()
            except BrokenPipeError:
                break
    try:
        child.stdin.close()
    except BrokenPipeError:
        pass
    return child.wait()


if __name__ == "__main__":
    sys.exit(main())
