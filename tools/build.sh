#!/usr/bin/env bash
# Builds the test tools pinned in tools/go.mod (helm, etcd, kube-apiserver, promtool) once per machine
# and links them into tools/bin. Binaries are kept in a machine-level cache keyed by a hash of go.mod,
# go.sum and the build stamps below, so a fresh clone (CI) reuses them and a version bump builds a new
# set beside the old.
#   TOLLGATE_TOOLS_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/tollgate-tools)
#   --resolve             print the versions, stamps and cache key, and stop (no build, no download)
#   --check               exit 0 when tools/bin holds the tools of this go.mod (no build)
set -euo pipefail
cd "$(dirname "$0")"

# Versions are read from go.mod's text, not from the module cache (`go list -m` and `.Dir` need the
# modules downloaded, which a fresh machine has not done yet): resolving the cache key needs no network.
version() { # module path -> its version, the replacement's when go.mod replaces it
  awk -v m="$1" '
    $1 == m && $2 == "=>" && $4 ~ /^v/ { replaced = $4 }
    $1 == m && $2 ~ /^v/ && !required { required = $2 }
    END { v = replaced ? replaced : required; if (!v) exit 1; print v }' go.mod \
    || { echo "tools: $1 is not in tools/go.mod" >&2; exit 1; }
}

# Version stamps the upstream Makefiles set: helm and kube-apiserver check Kubernetes versions against
# them (a chart's kubeVersion, the server's reported version), so an unstamped build misbehaves.
kube=$(version k8s.io/kubernetes)            # v1.37.2
kube_minor=$(echo "$kube" | cut -d. -f2)
helm=$(version helm.sh/helm/v3)
kube_ldflags="-X k8s.io/component-base/version.gitVersion=$kube -X k8s.io/component-base/version.gitMajor=1 \
-X k8s.io/component-base/version.gitMinor=$kube_minor -X k8s.io/component-base/version.gitTreeState=clean \
-X k8s.io/client-go/pkg/version.gitVersion=$kube -X k8s.io/client-go/pkg/version.gitMajor=1 \
-X k8s.io/client-go/pkg/version.gitMinor=$kube_minor"
helm_ldflags="-X helm.sh/helm/v3/internal/version.version=$helm \
-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$kube_minor \
-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$kube_minor"

# Prometheus's Go module numbers release 3.X.Y as v0.3XX.Y (v0.316.0 is 3.16.0; its VERSION file says
# so); derived here rather than read from the downloaded module.
prom_module=$(version github.com/prometheus/prometheus)
prom_minor=$(echo "$prom_module" | cut -d. -f2)
prom_version="$((10#$prom_minor / 100)).$((10#$prom_minor % 100)).$(echo "$prom_module" | cut -d. -f3)"
prom_ldflags="-X github.com/prometheus/common/version.Version=$prom_version"

# The prometheus-operator CRDs (ServiceMonitor, PrometheusRule), so the production values install into
# the test API server with the real schemas. Taken from the operator's Go module (checksum-verified
# by the Go toolchain like any module), not from its release assets.
promop=github.com/prometheus-operator/prometheus-operator@v0.85.0

# The cache key: the pinned modules and how they are built.
hash=$(printf '%s\n' "$(cat go.mod go.sum)" "$kube_ldflags" "$helm_ldflags" "$prom_ldflags" "$promop" | sha256sum | cut -c1-16)
cache="${TOLLGATE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tollgate-tools}/$hash"
if [ "${1:-}" = --resolve ]; then
  printf 'kubernetes %s\nhelm %s\nprometheus %s\nprometheus-operator %s\nhash %s\ncache %s\n' \
    "$kube" "$helm" "$prom_version" "${promop#*@}" "$hash" "$cache"
  exit 0
fi
if [ "${1:-}" = --check ]; then
  # CI's test run: are the tools of this tools/go.mod linked? (No building.)
  [ "$(cat bin/.hash 2>/dev/null)" = "$hash" ] && exit 0
  echo "tools/bin does not hold the tools of this tools/go.mod (want $hash): run \`make tools\`" >&2
  exit 1
fi
mkdir -p "$cache/bin" bin
# Every module the builds read, fetched up front (a fresh machine's module cache is empty; `go build`
# would fetch them too, but one download step shows its own time and fails early and clearly).
echo "tools: downloading modules"
started=$SECONDS
go mod download
echo "tools: modules downloaded in $((SECONDS - started)) s"
# One build at a time per cache (test files may ask for the tools at once).
exec 9>"$cache/.lock"
flock 9

build() { # name package ldflags
  local name=$1 pkg=$2 ldflags=$3
  if [ -x "$cache/bin/$name" ]; then
    echo "tools: $name reused from $cache/bin"
  else
    echo "tools: building $name ($pkg)"
    local started=$SECONDS
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $ldflags" -o "$cache/bin/$name.tmp" "$pkg"
    mv "$cache/bin/$name.tmp" "$cache/bin/$name"
    echo "tools: built $name in $((SECONDS - started)) s"
  fi
  ln -sf "$cache/bin/$name" "bin/$name"
}

build helm helm.sh/helm/v3/cmd/helm "$helm_ldflags"
build etcd go.etcd.io/etcd/server/v3 ""
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$kube_ldflags"
build promtool github.com/prometheus/prometheus/cmd/promtool "$prom_ldflags"

if [ ! -s "$cache/crds/monitoring.coreos.com_prometheusrules.yaml" ]; then
  dir=$(cd "$(mktemp -d)" && go mod download -json "$promop" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  mkdir -p "$cache/crds"
  for crd in servicemonitors prometheusrules; do
    cp "$dir/example/prometheus-operator-crd/monitoring.coreos.com_$crd.yaml" "$cache/crds/"
  done
fi
rm -rf bin/crds
ln -sfn "$cache/crds" bin/crds
echo "$hash" > bin/.hash
