// Command etcd is etcd's own server, pinned by this module, for the e2e
// suite's kube-apiserver.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
