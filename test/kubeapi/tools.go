//go:build tools

// Package kubeapi pins a real kube-apiserver and etcd for the e2e suite's
// DRA scenarios (test/e2e, the ResourceSlices): `make kubeapi` builds both
// from this module into _build/kubeapi. It is a module of its own because
// k8s.io/kubernetes needs its staging modules replaced, which the
// collector's module must not carry.
package kubeapi

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
)
