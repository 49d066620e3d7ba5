// Command caliban-operator runs the caliban operator. It is configured only
// by environment variables (docs/deploying.md#configuration), reaches the cluster through
// KUBECONFIG when set and the in-cluster configuration otherwise, and exits
// non-zero with the offending variable named when its configuration is
// invalid.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/caliban-ai/caliban-operator/pkg/builders"
	calibanclient "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned"
	"github.com/caliban-ai/caliban-operator/pkg/operator"
)

// version and commit are stamped at build time with -ldflags -X.
var (
	version = "dev"
	commit  = "unknown"
)

// serviceAccountNamespaceFile holds the pod's namespace in a cluster.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

func main() {
	settings, err := builders.ParseSettings(os.LookupEnv, podNamespace())
	if err != nil {
		fmt.Fprintf(os.Stderr, "caliban-operator: invalid configuration:\n%v\n", err)
		os.Exit(2)
	}
	logger := newLogger(settings)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = klog.NewContext(ctx, logger)

	if err := run(ctx, settings); err != nil {
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
func newLogger(s builders.Settings) klog.Logger {
	if s.LogFormat == builders.LogFormatJSON {
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

func run(ctx context.Context, s builders.Settings) error {
	logger := klog.FromContext(ctx)
	logger.Info("Starting caliban-operator", "version", version, "commit", commit,
		"leaderElection", s.LeaderElection, "watchNamespace", s.WatchNamespace, "workers", s.Workers)

	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return fmt.Errorf("loading the cluster configuration (KUBECONFIG, else in-cluster): %w", err)
	}
	cfg.QPS, cfg.Burst = s.KubeAPIQPS, s.KubeAPIBurst
	cfg.UserAgent = builders.FieldManager + "/" + version
	clients, err := newClients(cfg)
	if err != nil {
		return err
	}

	metrics := operator.NewMetrics()
	operator.RegisterClientMetrics(metrics.Registry)
	op := &operator.Operator{Clients: clients, Settings: s, Metrics: metrics}
	state := &probeState{}
	if s.MetricsBindAddress != "" {
		if err := serveHTTP(ctx, s.MetricsBindAddress, metrics, state, op); err != nil {
			return err
		}
	}

	if !s.LeaderElection {
		state.leading.Store(true)
		return op.Run(ctx)
	}
	return runWithLeaderElection(ctx, s, clients, state, op)
}

func newClients(cfg *rest.Config) (operator.Clients, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return operator.Clients{}, err
	}
	cal, err := calibanclient.NewForConfig(cfg)
	if err != nil {
		return operator.Clients{}, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return operator.Clients{}, err
	}
	return operator.Clients{Kube: kube, Caliban: cal, Dynamic: dyn}, nil
}

// runWithLeaderElection campaigns for the lease until ctx ends. Each term
// runs fresh controllers; losing the lease stops them and, once they have
// stopped, goes back to campaigning instead of exiting. On shutdown the
// order is: stop taking work, let syncs in flight finish (bounded by the
// controllers' drain timeout), then release the lease.
func runWithLeaderElection(ctx context.Context, s builders.Settings, clients operator.Clients, state *probeState, op *operator.Operator) error {
	logger := klog.FromContext(ctx)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: s.LeaseName, Namespace: s.LeaseNamespace},
		Client:     clients.Kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: s.PodName},
	}
	lease := s.LeaseNamespace + "/" + s.LeaseName
	for ctx.Err() == nil {
		// The elector outlives ctx so that it releases the lease only after
		// the controllers have drained.
		electorCtx, cancelElector := context.WithCancel(context.WithoutCancel(ctx))
		termDone := make(chan struct{})
		var leading atomic.Bool
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			Name:            s.LeaseName,
			LeaseDuration:   s.LeaseDuration,
			RenewDeadline:   s.RenewDeadline(),
			RetryPeriod:     s.RetryPeriod(),
			ReleaseOnCancel: true,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(termCtx context.Context) {
					leading.Store(true)
					defer close(termDone)
					// The term ends when the lease is lost or on shutdown.
					opCtx, stop := context.WithCancel(termCtx)
					defer stop()
					defer context.AfterFunc(ctx, stop)()
					logger.Info("Leading: starting controllers", "lease", lease, "identity", s.PodName)
					state.leading.Store(true)
					if err := op.Run(opCtx); err != nil {
						logger.Error(err, "Controllers stopped with an error")
					}
					state.leading.Store(false)
				},
				OnStoppedLeading: func() {
					logger.Info("Not leading", "lease", lease)
				},
				OnNewLeader: func(identity string) {
					if identity != s.PodName {
						logger.Info("Standing by", "leader", identity)
					}
				},
			},
		})
		if err != nil {
			cancelElector()
			return fmt.Errorf("configuring leader election: %w", err)
		}
		electorDone := make(chan struct{})
		go func() {
			select {
			case <-ctx.Done():
				if leading.Load() {
					<-termDone
				}
				cancelElector()
			case <-electorDone:
			}
		}()
		elector.Run(electorCtx)
		close(electorDone)
		cancelElector()
		// A lost lease cancels the term; never let two terms overlap.
		if leading.Load() {
			<-termDone
		}
	}
	return nil
}

// probeState is what /readyz reports.
type probeState struct {
	leading atomic.Bool
}

func serveHTTP(ctx context.Context, addr string, metrics *operator.Metrics, state *probeState, op *operator.Operator) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		switch {
		case state.leading.Load() && !op.Running():
			http.Error(w, "leading, waiting for caches to sync", http.StatusServiceUnavailable)
		default:
			fmt.Fprintln(w, "ok")
		}
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s %s: %w", builders.EnvMetricsBindAddress, addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "Metrics server stopped")
		}
	}()
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	return nil
}
