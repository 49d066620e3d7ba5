// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// hostCPU is the machine's CPU time, busy and in total, and the CPU time of
// the processes of the test bed by command name: what tells a bound set by
// the machine (every core busy, most of it in the apiserver and etcd) from
// one set by the operator.
type hostCPU struct {
	busy, total time.Duration
	byProcess   map[string]time.Duration
}

// benchProcesses are the command names (/proc/<pid>/comm, at most 15
// bytes) worth a row; everything else is summed under "other". The
// operator's row is operatorKey, whatever its binary is called.
var benchProcesses = []string{"etcd", "kube-apiserver", "kube-controller", "kube-scheduler", "kwok", "bench", "agent-sandbox"}

const operatorKey = "caliban-operator"

// otherClustersKey is the row of test-bed processes that serve another
// cluster than the benchmark's: on a shared machine, another user's
// integration tests run the same binaries.
const otherClustersKey = "other clusters"

// floorKey is the bare client's row, and its binary's name (floorrun.go).
const floorKey = "caliban-floor"

// readHostCPU reads the machine's CPU and its processes'; the processes of
// operatorBinary are the operator's.
func readHostCPU(operatorBinary string) (hostCPU, error) {
	return readHostCPUOf(operatorBinary, "")
}

// hostCPU reads the machine's CPU with the benchmark's cluster told apart
// from any other on the machine.
func (b *bench) hostCPU() (hostCPU, error) {
	return readHostCPUOf(b.cfg.OperatorBinary, b.cluster.Name)
}

// readHostCPUOf is readHostCPU where, when cluster is not empty, a
// process of the test bed (every name of benchProcesses but the
// benchmark's own) counts under its name only if its command line names
// the cluster, and under otherClustersKey otherwise: kwokctl runs a
// cluster's components from its directory (~/.kwok/clusters/<name>/) and
// hands agent-sandbox's controller a kubeconfig under a directory named
// after it.
func readHostCPUOf(operatorBinary, cluster string) (hostCPU, error) {
	// The kernel keeps the first 15 bytes of the executable's name.
	operatorComm := filepath.Base(operatorBinary)
	if len(operatorComm) > 15 {
		operatorComm = operatorComm[:15]
	}
	h := hostCPU{byProcess: map[string]time.Duration{}}
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return h, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line)
	if len(fields) < 8 || fields[0] != "cpu" {
		return h, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	// user nice system idle iowait irq softirq steal ...; idle and iowait
	// are the idle ones.
	for i, f := range fields[1:] {
		if i >= 8 {
			break
		}
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return h, fmt.Errorf("/proc/stat: %w", err)
		}
		d := time.Duration(n) * time.Second / clockTicks
		h.total += d
		if i != 3 && i != 4 {
			h.busy += d
		}
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		comm, err := os.ReadFile(filepath.Join(filepath.Dir(path), "comm"))
		if err != nil {
			continue // gone since the glob
		}
		cpu, err := processCPU(pid)
		if err != nil {
			continue
		}
		name := strings.TrimSpace(string(comm))
		key := "other"
		switch name {
		case operatorComm:
			key = operatorKey
		case floorKey:
			key = floorKey
		default:
			for _, p := range benchProcesses {
				if strings.HasPrefix(name, p) {
					key = p
					break
				}
			}
			if cluster != "" && key != "other" && key != "bench" {
				cmdline, err := os.ReadFile(filepath.Join(filepath.Dir(path), "cmdline"))
				if err != nil {
					continue
				}
				if !strings.Contains(string(cmdline), cluster) {
					key = otherClustersKey
				}
			}
		}
		h.byProcess[key] += cpu
	}
	return h, nil
}

// hostShare is the machine's CPU between two readings: busy share of all
// cores, and each process group's CPU time. Processes that started or
// ended in between count with what they had at the readings.
type hostShare struct {
	busyPercent float64
	cores       float64
	byProcess   map[string]time.Duration
}

func hostDelta(before, after hostCPU, wall time.Duration) hostShare {
	s := hostShare{byProcess: map[string]time.Duration{}}
	if total := after.total - before.total; total > 0 {
		s.busyPercent = 100 * float64(after.busy-before.busy) / float64(total)
		if wall > 0 {
			s.cores = float64(total) / float64(wall)
		}
	}
	for k, v := range after.byProcess {
		if d := v - before.byProcess[k]; d > 0 {
			s.byProcess[k] = d
		}
	}
	return s
}

// table is the burst's CPU by process, largest first, per one of n
// (tasks, or claims: what).
func (s hostShare) table(n float64, what string, wall time.Duration) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "Machine busy %.0f %% of %.0f cores over %.1f s.\n\n", s.busyPercent, s.cores, wall.Seconds())
	fmt.Fprintf(&sb, "| Process | CPU | Per %s | Share of the machine |\n|---|---:|---:|---:|\n", what)
	keys := make([]string, 0, len(s.byProcess))
	for k := range s.byProcess {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return s.byProcess[keys[i]] > s.byProcess[keys[j]] })
	for _, k := range keys {
		d := s.byProcess[k]
		share := 0.0
		if wall > 0 && s.cores > 0 {
			share = 100 * float64(d) / (float64(wall) * s.cores)
		}
		fmt.Fprintf(&sb, "| %s | %s s | %s ms | %.0f %% |\n", k, format(d.Seconds()), format(ms(d)/n), share)
	}
	return sb.String()
}

// machineLimit is the tasks/s this machine could carry if the operator
// cost nothing: its cores over the CPU per task of every other process
// (apiserver, etcd, the stand-in, the controller manager, the benchmark's
// own client). 0 when unknown.
func (s hostShare) machineLimit(n float64) float64 {
	var others time.Duration
	for k, v := range s.byProcess {
		if k != operatorKey {
			others += v
		}
	}
	if others <= 0 || n <= 0 {
		return 0
	}
	return s.cores / (others.Seconds() / n)
}
