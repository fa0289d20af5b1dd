#!/usr/bin/env bash
# Builds the test bed's tools from source (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, the Temporal CLI) with the machine's Go toolchain, through the Go module
# proxy, into a cache outside the repository keyed by version. A second run finds them and does
# nothing. Prints the cache folder of each tool on its last lines as NAME=PATH.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
cache=${QUEEN_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/queen-operator/tools}

if ! command -v go >/dev/null 2>&1; then
  echo "build-tools: the Go toolchain (go 1.26 or later) is needed to build the test bed's tools; install it and run again" >&2
  exit 1
fi

log() { echo "build-tools: $*" >&2; }

# build DIR MODULE_FILE_BODY PACKAGES... : a throwaway module in a temp folder, then go build.
build() {
  local out=$1 gomod=$2 ldflags=$3; shift 3
  local tmp; tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  printf '%s\n' "$gomod" > "$tmp/go.mod"
  printf 'package tools\n' > "$tmp/tools.go"
  mkdir -p "$out.partial"
  (
    cd "$tmp"
    # Resolve the whole module graph once at the pinned versions; the build then only adds sums.
    GOFLAGS=-mod=mod go mod download >/dev/null
    CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w $ldflags" -o "$out.partial/" "$@"
  )
  rm -rf "$out"; mv "$out.partial" "$out"
}

k8s_dir="$cache/kubernetes-$K8S_VERSION"
if [ ! -x "$k8s_dir/kube-apiserver" ] || [ ! -x "$k8s_dir/kubectl" ]; then
  log "building kube-apiserver, kube-controller-manager, kube-scheduler and kubectl $K8S_VERSION (the first time takes 15 to 30 minutes on 2 cores)"
  staging_version="v0${K8S_VERSION#v1}"
  modfile=$(cd "$(mktemp -d)" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  replaces=$(sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\t\1 => \1 '"$staging_version"'#p' "$modfile")
  minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  build "$k8s_dir" "module queen-testbed-kubernetes

go 1.26

require k8s.io/kubernetes $K8S_VERSION

replace (
$replaces
)" "-X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
fi

etcd_dir="$cache/etcd-$ETCD_VERSION"
if [ ! -x "$etcd_dir/etcd" ]; then
  log "building etcd $ETCD_VERSION"
  build "$etcd_dir" "module queen-testbed-etcd

go 1.26

require go.etcd.io/etcd/server/v3 $ETCD_VERSION

replace (
	go.etcd.io/etcd/api/v3 => go.etcd.io/etcd/api/v3 $ETCD_VERSION
	go.etcd.io/etcd/client/pkg/v3 => go.etcd.io/etcd/client/pkg/v3 $ETCD_VERSION
	go.etcd.io/etcd/client/v3 => go.etcd.io/etcd/client/v3 $ETCD_VERSION
	go.etcd.io/etcd/pkg/v3 => go.etcd.io/etcd/pkg/v3 $ETCD_VERSION
)" "" go.etcd.io/etcd/server/v3
  mv "$etcd_dir/server" "$etcd_dir/etcd"
fi

temporal_dir="$cache/temporal-cli-$TEMPORAL_CLI_VERSION"
if [ ! -x "$temporal_dir/temporal" ]; then
  log "building the Temporal CLI $TEMPORAL_CLI_VERSION (dev server and Web UI)"
  build "$temporal_dir" "module queen-testbed-temporal

go 1.26

require github.com/temporalio/cli $TEMPORAL_CLI_VERSION" "" github.com/temporalio/cli/cmd/temporal
fi

echo "KUBERNETES_BIN=$k8s_dir"
echo "ETCD_BIN=$etcd_dir"
echo "TEMPORAL_BIN=$temporal_dir"
