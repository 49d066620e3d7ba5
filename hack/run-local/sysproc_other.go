// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package main

import "syscall"

// operatorSysProcAttr puts the operator in its own process group (see
// runOperator).
func operatorSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
