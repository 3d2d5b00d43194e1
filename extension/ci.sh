#!/usr/bin/env bash
# CI for the VS Code extension, from a clean checkout on a CPU-only machine: build the .vsix, run the
# unit tests, then the end-to-end test in a real VS Code (code-server driven by Debian's chromium).
# Everything it installs stays under extension/ (node_modules, .tmp/); called by .ci/run.
set -euo pipefail
cd "$(dirname "$0")"

echo "== extension: build"
export npm_config_cache="$PWD/.tmp/npm-cache"
npm ci --no-audit --no-fund
npm run package

echo "== extension: unit tests"
npm test

echo "== extension: end-to-end test (code-server + chromium)"
e2e/setup.sh
npm run e2e
