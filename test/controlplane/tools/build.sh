#!/usr/bin/env bash
# Builds the local control plane from source (through the Go module proxy) into a
# per-user cache keyed by the versions, and prints the directory that holds it:
# kube-apiserver and etcd, which every local cluster runs, and
# kube-controller-manager, kube-scheduler and kwok, which a cluster that runs
# workloads adds (kwok simulates its nodes and their pods).
# A second run, or a fresh clone on the same machine, reuses the cached binaries.
# Concurrent callers (parallel test packages) wait on a lock instead of building twice.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
k8s=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
etcd=$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
kwok=$(cd kwok && go list -m -f '{{.Version}}' sigs.k8s.io/kwok)
cache="${FLEET_CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gitfleet/controlplane}"
# The script version is part of the key: a change to how binaries are built
# must not reuse binaries built the old way.
dir="$cache/kube-$k8s-etcd-$etcd-kwok-$kwok-b3"
bins=(kube-apiserver kube-controller-manager kube-scheduler etcd kwok)
complete() {
  for b in "${bins[@]}"; do
    [[ -x "$dir/$b" ]] || return 1
  done
}
# A complete directory never changes (it is moved into place whole): no lock
# needed to use it, so callers of a cached version never wait for the build
# of another.
if complete; then
  echo "$dir"
  exit 0
fi
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if complete; then
  echo "$dir"
  exit 0
fi
tmp="$(mktemp -d "$cache/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
echo "Building kube-apiserver, kube-controller-manager and kube-scheduler $k8s (a cold build of all five binaries takes about 9 minutes on 2 cores)" >&2
# Stamp the release version in: clients (Helm's kubeVersion checks among them)
# read it from /version.
minor=$(echo "$k8s" | cut -d. -f2)
v=k8s.io/component-base/version
# One go build for the three: they share most packages, and the linker runs
# for each while the compiler is busy with the next.
go build -trimpath -o "$tmp/" -ldflags="-s -X $v.gitVersion=$k8s -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler
echo "Building etcd $etcd" >&2
go build -trimpath -ldflags=-s -o "$tmp/etcd" go.etcd.io/etcd/server/v3
echo "Building kwok $kwok" >&2
(cd kwok && go build -trimpath -ldflags=-s -o "$tmp/kwok" sigs.k8s.io/kwok/cmd/kwok)
echo "Control plane built in $((SECONDS - start))s" >&2
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
echo "$dir"
