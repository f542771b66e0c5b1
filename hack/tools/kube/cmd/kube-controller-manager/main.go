// Command kube-controller-manager is the upstream controller manager, built
// from Go modules; the tests run only its namespace and garbage-collector
// controllers so that deleted namespaces terminate and owners are collected.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
