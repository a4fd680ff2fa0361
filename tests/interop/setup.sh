#!/usr/bin/env bash
# Installs the third-party MCP peers the interop tests start: the official Python SDK server
# (mcp==2.3.0, in .venv) and @modelcontextprotocol/server-everything@2026.8.31 (node_modules).
# Idempotent and quick once done; `cargo xtask ci` runs it.
set -euo pipefail
cd "$(dirname "$0")"

if ! .venv/bin/python -c 'import importlib.metadata as m, sys; sys.exit(m.version("mcp") != "2.3.0")' 2>/dev/null; then
  python3 -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check "mcp==2.3.0" "uvicorn==0.54.0"
fi

if [ ! -f node_modules/@modelcontextprotocol/server-everything/dist/index.js ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
echo "interop peers: mcp $(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("mcp"))'), server-everything $(node -p 'require("./node_modules/@modelcontextprotocol/server-everything/package.json").version')"
