#!/usr/bin/env bash
# Builds kube-apiserver and etcd from source (through the Go module proxy) into a
# per-user cache keyed by their versions, and prints the directory that holds them.
# A second run, or a fresh clone on the same machine, reuses the cached binaries.
# Concurrent callers (parallel test packages) wait on a lock instead of building twice.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
k8s=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
etcd=$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
cache="${FLEET_CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gitfleet/controlplane}"
# The script version is part of the key: a change to how binaries are built
# must not reuse binaries built the old way.
dir="$cache/kube-$k8s-etcd-$etcd-b2"
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if [[ -x "$dir/kube-apiserver" && -x "$dir/etcd" ]]; then
  echo "$dir"
  exit 0
fi
tmp="$(mktemp -d "$cache/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
echo "Building kube-apiserver $k8s (a cold build takes about 5 minutes on 2 cores)" >&2
# Stamp the release version in: clients (Helm's kubeVersion checks among them)
# read it from /version.
minor=$(echo "$k8s" | cut -d. -f2)
v=k8s.io/component-base/version
go build -trimpath -o "$tmp/kube-apiserver" -ldflags="-s -X $v.gitVersion=$k8s -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean" \
  k8s.io/kubernetes/cmd/kube-apiserver
echo "Building etcd $etcd" >&2
go build -trimpath -ldflags=-s -o "$tmp/etcd" go.etcd.io/etcd/server/v3
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
echo "$dir"
