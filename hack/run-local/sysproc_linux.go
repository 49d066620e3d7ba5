// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"runtime"
	"syscall"
)

// operatorSysProcAttr puts the operator in its own process group (see
// runOperator) and has the kernel send it SIGTERM should run-local die
// without stopping it (SIGKILL), so it never outlives the cluster unseen.
func operatorSysProcAttr() *syscall.SysProcAttr {
	// The death signal follows the thread that forks, not the process: keep
	// the calling goroutine (main's, which lives as long as the process) on
	// its thread so that the thread never exits first.
	runtime.LockOSThread()
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
