#!/usr/bin/env bash
# Builds the test bed's tools from source (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, the Temporal CLI, Helm, the CSI snapshot controller, and the VolumeSnapshot
# definitions its client module carries) with the machine's Go toolchain, through the Go module
# proxy, into a cache outside the repository keyed by version. A second run finds them and does
# nothing (and needs no Go). Prints the cache folder of each tool on its last lines as NAME=PATH.
#
# One source change is made, to kube-apiserver only (see KUBE_APISERVER_PATCH in versions.env):
# the simulated pods get loopback addresses (127.1.x.y), and the API server refuses loopback
# addresses in Endpoints and EndpointSlices, so the real endpoint controllers could not publish
# them. The patch drops that one check (ValidateEndpointIP's loopback branch) in a hard-linked
# copy of the module; nothing else differs from the release.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
cache=${QUEEN_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/queen-operator/tools}

k8s_dir="$cache/kubernetes-$K8S_VERSION"
etcd_dir="$cache/etcd-$ETCD_VERSION"
temporal_dir="$cache/temporal-cli-$TEMPORAL_CLI_VERSION"
helm_dir="$cache/helm-$HELM_VERSION"
snapshotter_dir="$cache/external-snapshotter-$EXTERNAL_SNAPSHOTTER_VERSION"
apiserver_marker="$k8s_dir/kube-apiserver.patch"

log() { echo "build-tools: $*" >&2; }

need_k8s=0; need_apiserver=0; need_etcd=0; need_temporal=0; need_helm=0; need_snapshotter=0
for t in kube-controller-manager kube-scheduler kubectl; do [ -x "$k8s_dir/$t" ] || need_k8s=1; done
if [ ! -x "$k8s_dir/kube-apiserver" ] || [ "$(cat "$apiserver_marker" 2>/dev/null)" != "$KUBE_APISERVER_PATCH" ]; then need_apiserver=1; fi
[ -x "$etcd_dir/etcd" ] || need_etcd=1
[ -x "$temporal_dir/temporal" ] || need_temporal=1
[ -x "$helm_dir/helm" ] || need_helm=1
[ -x "$snapshotter_dir/snapshot-controller" ] && [ -f "$snapshotter_dir/crd/snapshot.storage.k8s.io_volumesnapshots.yaml" ] || need_snapshotter=1

if [ $((need_k8s + need_apiserver + need_etcd + need_temporal + need_helm + need_snapshotter)) -gt 0 ] && ! command -v go >/dev/null 2>&1; then
  echo "build-tools: the Go toolchain (go 1.26 or later) is needed to build the test bed's tools once; install it (https://go.dev/dl/) and run again" >&2
  exit 1
fi

# build OUT_DIR GO_MOD_BODY LDFLAGS PACKAGES... : a throwaway module in a temp folder, then
# go build into OUT_DIR.partial; the binaries are moved into OUT_DIR one by one at the end, so an
# interrupted build leaves no half-written tool behind.
build() {
  local out=$1 gomod=$2 ldflags=$3; shift 3
  local tmp; tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  printf '%s\n' "$gomod" > "$tmp/go.mod"
  printf 'package tools\n' > "$tmp/tools.go"
  rm -rf "$out.partial"; mkdir -p "$out.partial"
  if ! (
    cd "$tmp"
    # Resolve the whole module graph once at the pinned versions; the build then only adds sums.
    GOFLAGS=-mod=mod go mod download >/dev/null
    CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w $ldflags" -o "$out.partial/" "$@"
  ); then
    rm -rf "$out.partial"
    return 1
  fi
  mkdir -p "$out"
  local f
  for f in "$out.partial"/*; do mv -f "$f" "$out/"; done
  rm -rf "$out.partial"
}

fail() { echo "build-tools: building $1 failed (the lines above say why); fix that and run test/testbed/build-tools.sh again" >&2; exit 1; }

k8s_module() {
  local staging_version="v0${K8S_VERSION#v1}" modfile replaces
  modfile=$(cd "$(mktemp -d)" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  [ -n "$modfile" ] || return 1
  replaces=$(sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\t\1 => \1 '"$staging_version"'#p' "$modfile")
  printf 'module queen-testbed-kubernetes\n\ngo 1.26\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n%s\n)\n' "$K8S_VERSION" "$replaces"
}
k8s_ldflags() {
  local minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  echo "-X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"
}

if [ $need_k8s = 1 ]; then
  log "building kube-controller-manager, kube-scheduler and kubectl $K8S_VERSION (the first time takes 15 to 30 minutes on 2 cores)"
  gomod=$(k8s_module) || fail "the Kubernetes module list"
  build "$k8s_dir" "$gomod" "$(k8s_ldflags)" \
    k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kubectl || fail "Kubernetes $K8S_VERSION"
fi

if [ $need_apiserver = 1 ]; then
  log "building kube-apiserver $K8S_VERSION with the test bed's patch ($KUBE_APISERVER_PATCH)"
  gomod=$(k8s_module) || fail "the Kubernetes module list"
  modsrc="$(go env GOMODCACHE)/k8s.io/kubernetes@$K8S_VERSION"
  [ -d "$modsrc" ] || (cd "$(mktemp -d)" && GOFLAGS=-mod=mod go mod download "k8s.io/kubernetes@$K8S_VERSION")
  # go build -overlay may not replace files of the module cache, so the module is hard-linked into
  # a local folder (cheap) and the one patched file is written there instead.
  src=$(mktemp -d)
  cp -al "$modsrc" "$src/kubernetes"
  vfile="$src/kubernetes/pkg/apis/core/validation/validation.go"
  chmod u+w "$(dirname "$vfile")"
  # ValidateEndpointIP: keep every check but the loopback one.
  sed 's/^\tif ip\.IsLoopback() {$/\tif false \&\& ip.IsLoopback() { \/\/ queen test bed: pods have loopback addresses/' "$modsrc/pkg/apis/core/validation/validation.go" > "$vfile.new"
  if [ "$(grep -c 'queen test bed: pods have loopback addresses' "$vfile.new")" != 1 ]; then
    echo "build-tools: the kube-apiserver patch no longer applies to $K8S_VERSION (ValidateEndpointIP changed); update it in build-tools.sh" >&2
    exit 1
  fi
  rm -f "$vfile"; mv "$vfile.new" "$vfile"
  gomod="$gomod
replace k8s.io/kubernetes => $src/kubernetes"
  build "$k8s_dir" "$gomod" "$(k8s_ldflags)" k8s.io/kubernetes/cmd/kube-apiserver \
    || { chmod -R u+w "$src"; rm -rf "$src"; fail "kube-apiserver $K8S_VERSION"; }
  chmod -R u+w "$src"; rm -rf "$src"
  echo "$KUBE_APISERVER_PATCH" > "$apiserver_marker"
fi

if [ $need_etcd = 1 ]; then
  log "building etcd $ETCD_VERSION"
  build "$etcd_dir" "module queen-testbed-etcd

go 1.26

require go.etcd.io/etcd/server/v3 $ETCD_VERSION

replace (
	go.etcd.io/etcd/api/v3 => go.etcd.io/etcd/api/v3 $ETCD_VERSION
	go.etcd.io/etcd/client/pkg/v3 => go.etcd.io/etcd/client/pkg/v3 $ETCD_VERSION
	go.etcd.io/etcd/client/v3 => go.etcd.io/etcd/client/v3 $ETCD_VERSION
	go.etcd.io/etcd/pkg/v3 => go.etcd.io/etcd/pkg/v3 $ETCD_VERSION
)" "" go.etcd.io/etcd/server/v3 || fail "etcd $ETCD_VERSION"
  # go build names the binary after the package path without its major-version suffix.
  for name in server v3; do
    if [ -x "$etcd_dir/$name" ]; then mv -f "$etcd_dir/$name" "$etcd_dir/etcd"; fi
  done
  [ -x "$etcd_dir/etcd" ] || fail "etcd $ETCD_VERSION (no binary came out)"
fi

if [ $need_temporal = 1 ]; then
  log "building the Temporal CLI $TEMPORAL_CLI_VERSION (dev server and Web UI)"
  build "$temporal_dir" "module queen-testbed-temporal

go 1.26

require github.com/temporalio/cli $TEMPORAL_CLI_VERSION" \
    "-X github.com/temporalio/cli/temporalcli.Version=${TEMPORAL_CLI_VERSION#v}" \
    github.com/temporalio/cli/cmd/temporal || fail "the Temporal CLI $TEMPORAL_CLI_VERSION"
fi

if [ $need_helm = 1 ]; then
  log "building Helm $HELM_VERSION"
  build "$helm_dir" "module queen-testbed-helm

go 1.26

require helm.sh/helm/v4 $HELM_VERSION" \
    "-X helm.sh/helm/v4/internal/version.version=$HELM_VERSION -X helm.sh/helm/v4/internal/version.gitTreeState=clean" \
    helm.sh/helm/v4/cmd/helm || fail "Helm $HELM_VERSION"
fi

if [ $need_snapshotter = 1 ]; then
  log "building the CSI snapshot controller $EXTERNAL_SNAPSHOTTER_VERSION and taking the VolumeSnapshot definitions of its client module"
  major=${EXTERNAL_SNAPSHOTTER_VERSION%%.*}
  # The main module points its client module at ./client (a replace that a dependency does not
  # get): the client module of the same release is required beside it.
  build "$snapshotter_dir" "module queen-testbed-snapshotter

go 1.26

require (
	github.com/kubernetes-csi/external-snapshotter/$major $EXTERNAL_SNAPSHOTTER_VERSION
	github.com/kubernetes-csi/external-snapshotter/client/$major $EXTERNAL_SNAPSHOTTER_VERSION
)" "-X main.version=$EXTERNAL_SNAPSHOTTER_VERSION" \
    "github.com/kubernetes-csi/external-snapshotter/$major/cmd/snapshot-controller" || fail "the snapshot controller $EXTERNAL_SNAPSHOTTER_VERSION"
  client=$(cd "$(mktemp -d)" && GOFLAGS=-mod=mod go mod download -json "github.com/kubernetes-csi/external-snapshotter/client/$major@$EXTERNAL_SNAPSHOTTER_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  [ -n "$client" ] && [ -d "$client/config/crd" ] || fail "the VolumeSnapshot definitions of external-snapshotter/client $EXTERNAL_SNAPSHOTTER_VERSION"
  mkdir -p "$snapshotter_dir/crd.partial"
  for kind in volumesnapshotclasses volumesnapshotcontents volumesnapshots; do
    cp "$client/config/crd/snapshot.storage.k8s.io_$kind.yaml" "$snapshotter_dir/crd.partial/"
  done
  chmod -R u+w "$snapshotter_dir/crd.partial"
  rm -rf "$snapshotter_dir/crd"; mv "$snapshotter_dir/crd.partial" "$snapshotter_dir/crd"
fi

echo "KUBERNETES_BIN=$k8s_dir"
echo "ETCD_BIN=$etcd_dir"
echo "TEMPORAL_BIN=$temporal_dir"
echo "HELM_BIN=$helm_dir"
echo "SNAPSHOTTER_BIN=$snapshotter_dir"
