// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Exit codes (docs/kubectl-caliban.md#exit-codes). `why` answers with 0
// or 1; every command fails with 2 or 3.
const (
	// ExitOK: done; for `why`, the task is Running or has finished.
	ExitOK = 0
	// ExitWaiting: `why` found the task blocked or waiting; `logs` found
	// no pod (or no container) to read yet.
	ExitWaiting = 1
	// ExitUsage: a usage error, or the task does not exist.
	ExitUsage = 2
	// ExitError: the cluster could not be asked (unreachable, forbidden,
	// a bad kubeconfig).
	ExitError = 3
)

// exitError carries the exit code an error ends the command with.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// WithCode makes err end the command with code.
func WithCode(code int, err error) error { return &exitError{code: code, err: err} }

// SilentExit ends a command with its code and no message: its output
// already said everything (why's line).
type SilentExit int

func (e SilentExit) Error() string { return fmt.Sprintf("exit %d", int(e)) }

// ExitCode is the exit code err ends the command with, and whether its
// message goes unsaid.
func ExitCode(err error) (code int, silent bool) {
	var s SilentExit
	if errors.As(err, &s) {
		return int(s), true
	}
	var coded *exitError
	if errors.As(err, &coded) {
		return coded.code, false
	}
	// cobra's own errors: an unknown command, a wrong number of arguments.
	return ExitUsage, false
}

// APIError gives an API error its exit code: not found is the user's
// (ExitUsage), anything else the cluster's (ExitError).
func APIError(err error, format string, args ...any) error {
	wrapped := fmt.Errorf(format+": %w", append(args, err)...)
	if apierrors.IsNotFound(err) {
		return WithCode(ExitUsage, wrapped)
	}
	return WithCode(ExitError, wrapped)
}

// ExactlyOneTask is the argument rule of the per-task commands; its error
// is a usage error.
func ExactlyOneTask(_ *cobra.Command, args []string) error {
	if len(args) != 1 {
		return WithCode(ExitUsage, fmt.Errorf("expected exactly one TASK name, got %d arguments", len(args)))
	}
	return nil
}
