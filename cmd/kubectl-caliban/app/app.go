// Package app is kubectl-caliban: the commands, what they read from the
// cluster, and how they print it. Deciding what a task waits for is not
// here but in pkg/diagnose (pure); rendering is done by functions of a
// gathered Snapshot and a clock, so both are tested without a cluster.
package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	calibanclient "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned"
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

// FieldManager is the server-side apply manager of suspend and resume.
const FieldManager = "kubectl-caliban"

// BuildInfo is the version stamped into the binary.
type BuildInfo struct {
	Version, Commit string
}

// exitError carries the exit code an error ends the command with.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func withCode(code int, err error) error { return &exitError{code: code, err: err} }

// silentExit ends a command with code and no message: its output already
// said everything (why's line).
type silentExit int

func (e silentExit) Error() string { return fmt.Sprintf("exit %d", int(e)) }

// options are what every command shares: kubectl's connection flags, the
// streams, and a clock for ages.
type options struct {
	flags   *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
	now     func() time.Time
}

type clients struct {
	caliban calibanclient.Interface
	kube    kubernetes.Interface
	dynamic dynamic.Interface
}

func (o *options) clients() (*clients, error) {
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return nil, withCode(ExitError, err)
	}
	c := &clients{}
	if c.caliban, err = calibanclient.NewForConfig(cfg); err != nil {
		return nil, withCode(ExitError, err)
	}
	if c.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, withCode(ExitError, err)
	}
	if c.dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, withCode(ExitError, err)
	}
	return c, nil
}

// namespace is the namespace the command acts in: -n, else the
// kubeconfig context's, else "default", as kubectl decides it.
func (o *options) namespace() (string, error) {
	ns, _, err := o.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", withCode(ExitError, err)
	}
	return ns, nil
}

// task reads the named task in the command's namespace, with the clients
// that read it.
func (o *options) task(ctx context.Context, name string) (*clients, *calibanv1alpha1.CalibanTask, error) {
	c, err := o.clients()
	if err != nil {
		return nil, nil, err
	}
	ns, err := o.namespace()
	if err != nil {
		return nil, nil, err
	}
	task, err := getTask(ctx, c, ns, name)
	if err != nil {
		return nil, nil, err
	}
	return c, task, nil
}

// apiError gives an API error its exit code: not found is the user's
// (ExitUsage), anything else the cluster's (ExitError).
func apiError(err error, format string, args ...any) error {
	wrapped := fmt.Errorf(format+": %w", append(args, err)...)
	if apierrors.IsNotFound(err) {
		return withCode(ExitUsage, wrapped)
	}
	return withCode(ExitError, wrapped)
}

// NewCommand is the root command, writing to streams.
func NewCommand(streams genericiooptions.IOStreams, info BuildInfo) *cobra.Command {
	o := &options{
		flags:   genericclioptions.NewConfigFlags(true),
		streams: streams,
		now:     time.Now,
	}
	root := &cobra.Command{
		Use:   "kubectl-caliban",
		Short: "Inspect and steer caliban-operator's CalibanTasks",
		Long: "kubectl caliban shows CalibanTasks, says what a task is waiting for, " +
			"suspends and resumes tasks and reads their caliband logs.",
		Version:       fmt.Sprintf("%s (commit %s)", info.Version, info.Commit),
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl caliban"},
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	root.SetIn(streams.In)
	o.flags.AddFlags(root.PersistentFlags())
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return withCode(ExitUsage, err) })
	root.AddCommand(newGetCommand(o), newDescribeCommand(o), newWhyCommand(o),
		newSuspendCommand(o, true), newSuspendCommand(o, false), newLogsCommand(o))
	return root
}

// Run runs the plugin with args (without the program name) and returns
// the exit code. Errors are written to streams.ErrOut.
func Run(ctx context.Context, args []string, streams genericiooptions.IOStreams, info BuildInfo) int {
	root := NewCommand(streams, info)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var silent silentExit
	if errors.As(err, &silent) {
		return int(silent)
	}
	fmt.Fprintf(streams.ErrOut, "error: %v\n", err)
	var coded *exitError
	if errors.As(err, &coded) {
		return coded.code
	}
	// cobra's own errors: an unknown command, a wrong number of arguments.
	return ExitUsage
}

// exactlyOneTask is the argument rule of the per-task commands; its error
// is a usage error.
func exactlyOneTask(_ *cobra.Command, args []string) error {
	if len(args) != 1 {
		return withCode(ExitUsage, fmt.Errorf("expected exactly one TASK name, got %d arguments", len(args)))
	}
	return nil
}
