//go:build !linux

package testenv

import "os/exec"

// Elsewhere than on Linux there is no parent-death signal: the control
// plane's processes are stopped by Stop only.

// linkParentDeath returns "": etcd and kube-apiserver start as they are.
func linkParentDeath(string) (string, error) { return "", nil }

func setParentDeath(*exec.Cmd) {}
