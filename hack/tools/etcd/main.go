// Command etcd is the upstream etcd server, built from Go modules so that
// tests and the local control plane need no binary download.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
