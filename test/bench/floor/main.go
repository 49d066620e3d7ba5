// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Command floor is the benchmark's bare client (harness.RunFloor): the
// requests and watches of the operator's work per task and nothing else,
// whose CPU per task `make bench` reads the operator's against. The
// benchmark builds and runs it; it is not meant to be run by hand.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/caliban-ai/caliban-operator/test/bench/harness"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "the cluster to act on")
	namespace := flag.String("namespace", "", "the namespace whose new tasks it takes to Running")
	flag.Parse()
	if *kubeconfig == "" || *namespace == "" {
		fmt.Fprintln(os.Stderr, "floor: -kubeconfig and -namespace are required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := harness.RunFloor(ctx, *kubeconfig, *namespace, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "floor: %v\n", err)
		os.Exit(1)
	}
}
