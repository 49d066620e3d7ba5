// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Main is a package's TestMain: it starts one cluster, stores it in *c, runs
// the tests and deletes the cluster, also when the process is interrupted or
// is about to hit go test's -timeout (which would otherwise kill it with no
// chance to clean up).
func Main(m *testing.M, c **Cluster) {
	MainWith(m, c, nil)
}

// MainWith is Main with package-level setup that runs before the cluster
// starts, such as building a binary the tests run. The teardown it returns
// (may be nil) runs after the tests and the cluster deletion, also when the
// process is interrupted or approaches -test.timeout. A setup error fails
// the package before any cluster exists.
func MainWith(m *testing.M, c **Cluster, setup func() (teardown func(), err error)) {
	MainWithOptions(m, c, setup, Options{})
}

// MainWithOptions is MainWith for a cluster started with opts (see
// StartWithOptions).
func MainWithOptions(m *testing.M, c **Cluster, setup func() (teardown func(), err error), opts Options) {
	flag.Parse()
	var teardown func()
	if setup != nil {
		var err error
		if teardown, err = setup(); err != nil {
			fmt.Fprintf(os.Stderr, "test package setup: %v\n", err)
			os.Exit(1)
		}
	}
	os.Exit(run(m, c, teardown, opts))
}

func run(m *testing.M, c **Cluster, teardown func(), opts Options) int {
	start := time.Now()
	cluster, err := StartWithOptions(context.Background(), opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the test cluster: %v\n", err)
		if teardown != nil {
			teardown()
		}
		return 1
	}
	fmt.Fprintf(os.Stderr, "test cluster %s up in %s (kubeconfig %s, logs %s)\n",
		cluster.Name, time.Since(start).Round(time.Millisecond), cluster.Kubeconfig, cluster.LogsDir)
	*c = cluster

	var once sync.Once
	cleanup := func() {
		once.Do(func() {
			if err := cluster.Delete(); err != nil {
				fmt.Fprintf(os.Stderr, "deleting the test cluster: %v\n", err)
			}
			if teardown != nil {
				teardown()
			}
		})
	}
	defer cleanup()

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		if s, ok := <-sigs; ok {
			fmt.Fprintf(os.Stderr, "%v: deleting test cluster %s\n", s, cluster.Name)
			cleanup()
			os.Exit(1)
		}
	}()

	if f := flag.Lookup("test.timeout"); f != nil {
		if d, ok := f.Value.(flag.Getter).Get().(time.Duration); ok && d > 0 {
			// Leave the cluster deletion time to finish before go test's
			// own alarm fires.
			margin := min(d/10, time.Minute)
			timer := time.AfterFunc(d-time.Since(start)-margin, func() {
				fmt.Fprintf(os.Stderr, "approaching -test.timeout: deleting test cluster %s\n", cluster.Name)
				cleanup()
			})
			defer timer.Stop()
		}
	}
	code := m.Run()
	if code != 0 {
		// Deleting the cluster removes its logs.
		fmt.Fprintf(os.Stderr, "tests failed: the logs of cluster %s are kept in %s\n", cluster.Name, cluster.KeepLogs())
	}
	return code
}
