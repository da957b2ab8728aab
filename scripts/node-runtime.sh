#!/usr/bin/env bash
# Installs the Node.js release line MAJOR (e.g. 24) from the npm registry into a cache directory
# and prints the directory holding its `node` binary: `export PATH="$(scripts/node-runtime.sh 24):$PATH"`.
# It installs `node-<os>-<arch>`, the platform package that the npm package `node@MAJOR` installs
# from its preinstall script; that script cannot run under npm >= 11.19, which refuses
# `--allow-scripts` in the nested install it starts. The package holds the official release
# (bin/node, include/node headers), so the binary is the one nodejs.org ships, fuses included
# (the single-file agent needs the SEA fuse).
set -euo pipefail
major="${1:?usage: scripts/node-runtime.sh MAJOR}"
[[ "$major" =~ ^[0-9]+$ ]] || { echo "node-runtime: MAJOR must be a number, got '$major'" >&2; exit 2; }
case "$(uname -m)" in
  x86_64) arch=x64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) echo "node-runtime: no Node.js package for $(uname -m)" >&2; exit 1 ;;
esac
os="$(uname -s | tr '[:upper:]' '[:lower:]')"
pkg="node-$os-$arch"
dir="${XDG_CACHE_HOME:-$HOME/.cache}/xfer/node/$major"
bin="$dir/node_modules/$pkg/bin"
# Reinstall at most once a day so a cached runtime follows the line's security releases.
if [[ ! -x "$bin/node" || -n "$(find "$dir/.installed" -mmin +1440 2>/dev/null)" || ! -e "$dir/.installed" ]]; then
  mkdir -p "$dir"
  printf '{"private":true}\n' >"$dir/package.json"
  (cd "$dir" && npm install --no-audit --no-fund --no-save --loglevel=error "$pkg@$major" >&2)
  "$bin/node" --version >/dev/null
  touch "$dir/.installed"
fi
echo "$bin"
