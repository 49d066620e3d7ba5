// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Every lease duration and grace that start-up accepts must also be
// accepted by client-go's elector, with the renew deadline and retry period
// the process derives from them: a configuration that passes validation and
// then fails when the operator first campaigns is a crash loop.
func TestLeaseSettingsThatPassStartUpBuildAnElector(t *testing.T) {
	build := func(s ProcessSettings) error {
		_, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: &resourcelock.LeaseLock{
				LeaseMeta:  metav1.ObjectMeta{Name: s.LeaseName, Namespace: s.LeaseNamespace},
				LockConfig: resourcelock.ResourceLockConfig{Identity: s.PodName},
			},
			Name:          s.LeaseName,
			LeaseDuration: s.LeaseDuration,
			RenewDeadline: s.RenewDeadline(),
			RetryPeriod:   s.RetryPeriod(),
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) {},
				OnStoppedLeading: func() {},
			},
		})
		return err
	}
	parse := func(duration, grace int64) (ProcessSettings, error) {
		return parseProcessSettings(settingsEnv(map[string]string{
			EnvLeaseDurationSeconds: strconv.FormatInt(duration, 10),
			EnvLeaseGraceSeconds:    strconv.FormatInt(grace, 10),
		}), settingsPodNamespace)
	}

	accepted := 0
	// Every pair up to two minutes, then the extremes.
	pairs := [][2]int64{{maxSeconds, 1}, {maxSeconds, maxSeconds - 1}, {maxSeconds, maxSeconds / 2}, {3600, 3599}}
	for d := int64(1); d <= 120; d++ {
		for g := int64(1); g <= d+1; g++ {
			pairs = append(pairs, [2]int64{d, g})
		}
	}
	for _, pair := range pairs {
		s, err := parse(pair[0], pair[1])
		if err != nil {
			if pair[1] < pair[0] {
				t.Errorf("duration %d, grace %d refused: %v", pair[0], pair[1], err)
			}
			continue
		}
		accepted++
		if err := build(s); err != nil {
			t.Errorf("duration %d, grace %d passed start-up, but the elector refuses renew deadline %s and retry period %s: %v",
				pair[0], pair[1], s.RenewDeadline(), s.RetryPeriod(), err)
		}
		// A deposed leader stops at the latest retry + renew deadline after
		// its last renewal, and its shutdown grace must have ended before a
		// standby may take over, a lease duration after it.
		if d := s.ShutdownGrace(); d <= 0 || s.RetryPeriod()+s.RenewDeadline()+d > s.LeaseDuration {
			t.Errorf("duration %d, grace %d: shutdown grace %s is not positive or overlaps the next leader", pair[0], pair[1], d)
		}
	}
	if accepted < 7000 {
		t.Errorf("only %d combinations accepted; the table no longer covers the range", accepted)
	}
}

func TestProcessSettingsDerivedDurations(t *testing.T) {
	tests := map[string]struct {
		duration, grace             time.Duration
		election                    bool
		renew, retry, shutdownGrace time.Duration
	}{
		"the defaults renew for 10 s, retry every 2.5 s and give a shutdown grace of the lease grace less a retry": {
			duration: 15 * time.Second, grace: 5 * time.Second, election: true,
			renew: 10 * time.Second, retry: 2500 * time.Millisecond, shutdownGrace: 2500 * time.Millisecond,
		},
		"a grace longer than the renew deadline retries within the deadline": {
			duration: 15 * time.Second, grace: 10 * time.Second, election: true,
			renew: 5 * time.Second, retry: 2500 * time.Millisecond, shutdownGrace: 7500 * time.Millisecond,
		},
		"the shortest lease still retries and has a shutdown grace": {
			duration: 2 * time.Second, grace: time.Second, election: true,
			renew: time.Second, retry: 500 * time.Millisecond, shutdownGrace: 500 * time.Millisecond,
		},
		"without leader election the shutdown grace has its own bound": {
			duration: 15 * time.Second, grace: 5 * time.Second, election: false,
			renew: 10 * time.Second, retry: 2500 * time.Millisecond, shutdownGrace: 10 * time.Second,
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			s := DefaultProcessSettings()
			s.LeaseDuration, s.LeaseGrace, s.LeaderElection = test.duration, test.grace, test.election
			got := [3]time.Duration{s.RenewDeadline(), s.RetryPeriod(), s.ShutdownGrace()}
			want := [3]time.Duration{test.renew, test.retry, test.shutdownGrace}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("renew, retry, shutdown grace (-want +got):\n%s", diff)
			}
		})
	}
}

// The two halves of the configuration are read independently: the agent
// half never looks at a process variable and the other way round, so a
// renderer cannot come to depend on how the process runs.
func TestSettingsHalvesReadDisjointVariables(t *testing.T) {
	record := func(into map[string]bool) func(string) (string, bool) {
		return func(name string) (string, bool) { into[name] = true; return "", false }
	}
	agent, process := map[string]bool{}, map[string]bool{}
	if _, err := parseAgentSettings(record(agent)); err != nil {
		t.Fatal(err)
	}
	if _, err := parseProcessSettings(record(process), settingsPodNamespace); err != nil {
		t.Fatal(err)
	}
	for name := range agent {
		if process[name] {
			t.Errorf("%s is read by both halves", name)
		}
	}
	for _, name := range []string{EnvCalibandImage, EnvWorkspaceRoot, EnvAgentSeccompProfile, EnvIngressPodSelector, EnvDNSNamespace, EnvDNSPodSelector} {
		if !agent[name] {
			t.Errorf("the agent half does not read %s", name)
		}
	}
	for _, name := range []string{EnvLeaderElection, EnvWorkers, EnvResyncSeconds, EnvWatchNamespace} {
		if !process[name] {
			t.Errorf("the process half does not read %s", name)
		}
	}
	if len(agent)+len(process) != len(settingsNames) {
		t.Errorf("the halves read %d + %d variables; Parse reads %d", len(agent), len(process), len(settingsNames))
	}
}

func TestParseHalvesRefuse(t *testing.T) {
	tests := map[string]struct {
		env  map[string]string
		want string
	}{
		"a resync of zero seconds": {
			env:  map[string]string{EnvResyncSeconds: "0"},
			want: "CALIBAN_RESYNC_SECONDS 0 is outside 1-9223372036",
		},
		"a resync that is not a number": {
			env:  map[string]string{EnvResyncSeconds: "5m"},
			want: `CALIBAN_RESYNC_SECONDS "5m" is not an integer`,
		},
		"a pprof address without a port": {
			env:  map[string]string{EnvPprofBindAddress: "127.0.0.1"},
			want: `CALIBAN_PPROF_BIND_ADDRESS "127.0.0.1" is neither 0 (disabled) nor host:port with a port in 1-65535`,
		},
		"a drain timeout of zero seconds": {
			env:  map[string]string{EnvDrainTimeoutSeconds: "0"},
			want: "CALIBAN_DRAIN_TIMEOUT_SECONDS 0 is outside 1-9223372036",
		},
		"a drain timeout that is a duration, not seconds": {
			env:  map[string]string{EnvDrainTimeoutSeconds: "10m"},
			want: `CALIBAN_DRAIN_TIMEOUT_SECONDS "10m" is not an integer`,
		},
		"a blank resync": {
			env:  map[string]string{EnvResyncSeconds: " "},
			want: "CALIBAN_RESYNC_SECONDS is set but blank",
		},
		"a pin key Secret name that is no object name": {
			env:  map[string]string{EnvPinKeySecret: "Pin_Key"},
			want: `CALIBAN_PIN_KEY_SECRET "Pin_Key" is not a valid object name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseProcessSettings(settingsEnv(test.env), settingsPodNamespace)
			if diff := cmp.Diff(test.want, fmt.Sprint(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(ProcessSettings{}, got); diff != "" {
				t.Errorf("settings returned with an error (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("the agent half reports its own variable", func(t *testing.T) {
		_, err := parseAgentSettings(settingsEnv(map[string]string{EnvCalibandPort: "7500"}))
		if want := "CALIBAND_PORT 7500 falls inside the agent port window 7100-7999"; fmt.Sprint(err) != want {
			t.Errorf("error %q, want %q", err, want)
		}
	})
	t.Run("pprof is off by default and served where asked", func(t *testing.T) {
		if s := DefaultProcessSettings(); s.PprofBindAddress != "" {
			t.Errorf("default PprofBindAddress %q, want off", s.PprofBindAddress)
		}
		s, err := parseProcessSettings(settingsEnv(map[string]string{EnvPprofBindAddress: "127.0.0.1:6060"}), settingsPodNamespace)
		if err != nil || s.PprofBindAddress != "127.0.0.1:6060" {
			t.Errorf("PprofBindAddress %q, err %v", s.PprofBindAddress, err)
		}
	})
	t.Run("a drain timeout is read in seconds", func(t *testing.T) {
		s, err := parseProcessSettings(settingsEnv(map[string]string{EnvDrainTimeoutSeconds: "3"}), settingsPodNamespace)
		if err != nil || s.TaskDrainTimeout != 3*time.Second {
			t.Errorf("TaskDrainTimeout %s, err %v; want 3s", s.TaskDrainTimeout, err)
		}
	})
	t.Run("the pin key lives in the operator's namespace, and in default only outside a cluster", func(t *testing.T) {
		s, err := parseProcessSettings(settingsEnv(map[string]string{EnvPinKeySecret: "other-key"}), "caliban-system")
		if err != nil || s.PinKeySecret != "other-key" || s.PinKeyNamespace() != "caliban-system" {
			t.Errorf("pin key %s/%s, err %v; want caliban-system/other-key", s.PinKeyNamespace(), s.PinKeySecret, err)
		}
		s, err = parseProcessSettings(settingsEnv(map[string]string{EnvLeaderElection: "false"}), "")
		if err != nil || s.PinKeySecret != DefaultPinKeySecret || s.PinKeyNamespace() != "default" {
			t.Errorf("pin key %s/%s, err %v; want default/%s", s.PinKeyNamespace(), s.PinKeySecret, err, DefaultPinKeySecret)
		}
	})
	t.Run("a resync period is read in seconds", func(t *testing.T) {
		s, err := parseProcessSettings(settingsEnv(map[string]string{EnvResyncSeconds: "7"}), settingsPodNamespace)
		if err != nil || s.ResyncPeriod != 7*time.Second {
			t.Errorf("ResyncPeriod %s, err %v; want 7s", s.ResyncPeriod, err)
		}
	})
}
