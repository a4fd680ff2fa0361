#!/usr/bin/env bash
# Installs the third-party MCP peers the interop tests start: the official Python SDK server
# (mcp==2.3.0, in .venv, served by uvicorn, or over TLS with HTTP/2 by hypercorn==0.18.0), two older Python SDK releases for the older protocol revisions
# (mcp==1.9.4 negotiates 2025-03-26, in .venv-mcp1.9; mcp==1.12.4 negotiates 2025-06-18, in
# .venv-mcp1.12; with the libraries of their time pinned beside them: with today's anyio, 1.9.4's
# session manager dies on the first DELETE) and @modelcontextprotocol/server-everything@2026.8.31
# (node_modules); for stdio bindings, @modelcontextprotocol/server-filesystem@2026.8.31 and
# server-memory@2026.8.31 (node_modules) and mcp-server-time==2026.10.19 (in .venv-time); for the OAuth tests, the
# authorization server oidc-provider@9.13.3 (node_modules, run by oauth_server.mjs); and the
# model APIs' SDKs openai-agents==0.24.0, anthropic==2.10.0, google-genai==3.3.0 (in .venv-models,
# whose code checks brain's tool definitions: model_apis.py); for `serve`'s clients, the
# TypeScript SDK @modelcontextprotocol/sdk@1.32.2 (serve_client.mjs) and the MCP Inspector CLI
# @modelcontextprotocol/inspector-cli@1.0.3 (node_modules). Idempotent and quick once done;
# `cargo xtask ci` runs it.
set -euo pipefail
cd "$(dirname "$0")"

if ! .venv/bin/python -c 'import importlib.metadata as m, sys; sys.exit(m.version("mcp") != "2.3.0" or m.version("hypercorn") != "0.18.0")' 2>/dev/null; then
  python3 -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check "mcp==2.3.0" "uvicorn==0.54.0" "hypercorn==0.18.0"
fi

# The libraries of mid-2025, pinned beside the old SDK releases.
OLD_PINS=("pydantic==2.11.7" "pydantic-core==2.33.2" "pydantic-settings==2.9.1" "anyio==4.9.0"
  "starlette==0.47.0" "sse-starlette==2.3.6" "uvicorn==0.34.3" "httpx==0.28.1" "httpx-sse==0.4.0"
  "httpcore==1.0.9" "h11==0.16.0" "python-multipart==0.0.20" "jsonschema==4.25.0"
  "typing-inspection==0.4.5" "click==8.2.1")
for version in 1.9.4 1.12.4; do
  venv=".venv-mcp${version%.*}"
  if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mcp') != '$version')" 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "mcp==$version" "${OLD_PINS[@]}"
  fi
done

# The stdio peers: mcp-server-time from PyPI, in a venv of its own.
if ! .venv-time/bin/python -c 'import importlib.metadata as m, sys; sys.exit(m.version("mcp-server-time") != "2026.10.19")' 2>/dev/null; then
  python3 -m venv .venv-time
  .venv-time/bin/pip install --quiet --disable-pip-version-check "mcp-server-time==2026.10.19"
fi

# The model APIs' own SDKs, whose code checks brain's tool definitions (model_apis.py); pydantic
# pinned too (google-genai's check is pydantic's).
MODEL_PINS=("openai-agents==0.24.0" "anthropic==2.10.0" "google-genai==3.3.0" "pydantic==2.14.4")
if ! .venv-models/bin/python -c 'import importlib.metadata as m, sys; sys.exit(any(m.version(p) != v for p, v in (a.split("==") for a in sys.argv[1:])))' "${MODEL_PINS[@]}" 2>/dev/null; then
  python3 -m venv .venv-models
  .venv-models/bin/pip install --quiet --disable-pip-version-check "${MODEL_PINS[@]}"
fi

if [ ! -f node_modules/@modelcontextprotocol/server-everything/dist/index.js ] \
  || [ ! -f node_modules/@modelcontextprotocol/server-filesystem/dist/index.js ] \
  || [ ! -f node_modules/@modelcontextprotocol/server-memory/dist/index.js ] \
  || [ ! -f node_modules/oidc-provider/package.json ] \
  || [ ! -f node_modules/@modelcontextprotocol/inspector-cli/build/cli.js ] \
  || [ "$(node -p "require('./node_modules/@modelcontextprotocol/sdk/package.json').version")" != 1.32.2 ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
version() { "$1/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))'; }
npm_version() { node -p "require('./node_modules/@modelcontextprotocol/$1/package.json').version"; }
echo "interop peers: mcp $(version .venv), $(version .venv-mcp1.9), $(version .venv-mcp1.12), server-everything $(npm_version server-everything), server-filesystem $(npm_version server-filesystem), sdk $(npm_version sdk), inspector-cli $(npm_version inspector-cli), oidc-provider $(node -p "require('./node_modules/oidc-provider/package.json').version"), mcp-server-time $(.venv-time/bin/python -c 'import importlib.metadata as m; print(m.version("mcp-server-time"))'), model SDKs $(.venv-models/bin/python -c 'import importlib.metadata as m; print(", ".join(p + " " + m.version(p) for p in ("openai-agents", "anthropic", "google-genai")))')"
