// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Command caliban-operator runs the caliban operator. It is configured only by
// environment variables (docs/deploying.md#configuration) and exits with
// status 2, every offending variable named, when they are invalid; the process
// itself is package app.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/go-logr/logr/funcr"
	"k8s.io/klog/v2"

	"github.com/caliban-ai/caliban-operator/cmd/caliban-operator/app"
	"github.com/caliban-ai/caliban-operator/pkg/config"
)

// version and commit are stamped at build time with -ldflags -X.
var (
	version = "dev"
	commit  = "unknown"
)

// serviceAccountNamespaceFile holds the pod's namespace in a cluster.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

func main() {
	settings, err := config.Parse(os.LookupEnv, podNamespace())
	if err != nil {
		fmt.Fprintf(os.Stderr, "caliban-operator: invalid configuration:\n%v\n", err)
		os.Exit(2)
	}
	logger := newLogger(settings)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A second signal during the shutdown grace ends the process at once.
	context.AfterFunc(ctx, stop)
	ctx = klog.NewContext(ctx, logger)

	if err := app.Run(ctx, settings, app.BuildInfo{Version: version, Commit: commit}); err != nil {
		logger.Error(err, "caliban-operator stopped")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	logger.Info("caliban-operator stopped")
	klog.Flush()
}

func podNamespace() string {
	b, err := os.ReadFile(serviceAccountNamespaceFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// newLogger configures klog, the logger every client-go component uses too:
// its text output at CALIBAN_LOG_VERBOSITY, or JSON lines with
// CALIBAN_LOG_FORMAT=json.
func newLogger(s config.Settings) klog.Logger {
	if s.LogFormat == config.LogFormatJSON {
		logger := funcr.NewJSON(func(obj string) { fmt.Fprintln(os.Stderr, obj) },
			funcr.Options{Verbosity: s.LogVerbosity, LogTimestamp: true, LogCaller: funcr.Error})
		klog.SetLogger(logger)
		return logger
	}
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("v", strconv.Itoa(s.LogVerbosity))
	return klog.Background()
}
