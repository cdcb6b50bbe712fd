#!/usr/bin/env bash
# `make check`: the whole suite on a fresh machine, in one command. Installs what is missing (Debian's
# packages when run as root, else a message naming each missing piece), puts Node 24 LTS first on the
# PATH (fetched into a cache when the machine's Node is older), starts PostgreSQL when it is installed
# but stopped, builds or reuses the Kubernetes test tools, installs the packages and runs `npm test`.
# CI (.ci/run) runs exactly this. On a machine that has everything, `npm test` is the inner loop.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { # name command...: runs a step and says how long it took (docs/development.md lists them)
  local name=$1 started=$SECONDS; shift
  echo "check: $name"
  "$@"
  echo "check: $name took $((SECONDS - started)) s"
}

# Debian's packages the suite needs, by the command that shows each is there.
declare -A packages=(
  [redis-server]=redis-server      # the ledger's Redis (the suite starts its own on a free port)
  [initdb]=postgresql              # the record's PostgreSQL (a throwaway server when none runs)
  [chromium]=chromium              # the dashboard's browser tests
  [openssl]=openssl                # the Kubernetes tests' API server certificates
  [make]=make
  [flock]=util-linux               # tools/build.sh: one tool build at a time
)
has() { command -v "$1" >/dev/null 2>&1 || { [ "$1" = initdb ] && compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; }; }
missing=()
for command in "${!packages[@]}"; do has "$command" || missing+=("${packages[$command]}"); done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    install_packages() {
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    }
    step "installing ${missing[*]} from Debian's packages" install_packages
  else
    echo "check: missing ${missing[*]}: install them (Debian: sudo apt-get install -y ${missing[*]}) and run again" >&2
    exit 1
  fi
fi
command -v go >/dev/null 2>&1 || { echo "check: Go 1.26 or newer is needed to build the test tools (tools/go.mod): install it and run again" >&2; exit 1; }
command -v npm >/dev/null 2>&1 || { echo "check: npm is needed (it fetches Node 24 and the packages): install Node.js with npm and run again" >&2; exit 1; }

# Node 24 LTS first on the PATH for everything below (npm's own scripts run on the first node found).
node_bin=$(tools/node.sh)
export PATH="$node_bin:$PATH"
hash -r
# npm 11 or newer (the lockfile's format and `npm ci`'s behaviour are those of npm 11).
if [ "$(npm --version | cut -d. -f1)" -lt 11 ]; then
  step "npm $(npm --version) is older than 11: installing npm@11" npm install -g npm@11 --no-audit --no-fund >/dev/null
  hash -r
fi
echo "check: node $(node --version), npm $(npm --version)"

# The tests use DATABASE_URL, else the server on 127.0.0.1:5432, else start a throwaway one themselves;
# start the packaged cluster when it is installed but not running.
if [ -z "${DATABASE_URL:-}" ] && command -v pg_ctlcluster >/dev/null 2>&1 && ! pg_isready -q -h 127.0.0.1 -p 5432; then
  for cluster in /etc/postgresql/*/main; do
    [ -d "$cluster" ] && pg_ctlcluster --skip-systemctl-redirect "$(basename "$(dirname "$cluster")")" main start || true
  done
fi

# helm, etcd, kube-apiserver and promtool for test/k8s: built from tools/go.mod once per machine (Go
# from the machine, modules from the Go proxy), reused from ~/.cache/tollgate-tools afterwards.
step "test tools (make tools)" tools/build.sh
step "packages (npm ci)" npm ci --no-audit --no-fund
# The k8s tests fail (rather than build the tools) when CI is set; the tools are built by now.
export CI="${CI:-true}"
step "suite (npm test)" npm test
