package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuSeconds returns the user+system CPU time of pid from /proc.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the parenthesised command name; utime and stime are the
	// 14th and 15th fields overall, in clock ticks (100 per second on Linux).
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	u, err1 := strconv.ParseFloat(f[11], 64)
	k, err2 := strconv.ParseFloat(f[12], 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return (u + k) / 100, nil
}

// hostCPU returns the busy and total jiffies of all CPUs from /proc/stat
// (busy: all but idle and iowait).
func hostCPU() (busy, total int64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	for i, x := range f[1:] {
		n, _ := strconv.ParseInt(x, 10, 64)
		if i >= 8 { // guest time is already in user
			break
		}
		total += n
		if i != 3 && i != 4 {
			busy += n
		}
	}
	return busy, total
}

// selfCPU returns the suite's own user+system CPU seconds.
func selfCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// cpuUse is the CPU that the suite's processes and the host spent over
// one measured run.
type cpuUse struct {
	Seconds float64 `json:"seconds"` // wall time of the run
	// Procs is each measured process's user+system CPU seconds, by name.
	Procs map[string]float64 `json:"proc_cpu_s"`
	// ClientS is the load generator's user+system CPU seconds.
	ClientS float64 `json:"client_cpu_s"`
	// HostBusyS is the CPU seconds all CPUs spent busy (not idle or
	// iowait); OtherS the part of it that neither the measured
	// processes, the load generator nor the suite spent: load from
	// elsewhere on the shared machine.
	HostBusyS float64 `json:"host_busy_cpu_s"`
	OtherS    float64 `json:"other_cpu_s"`
}

// cpuMeter measures the CPU of a set of processes and of the host from
// its start to its stop.
type cpuMeter struct {
	procs []*process
	t0    time.Time
	cpu0  []float64
	busy0 int64
	self0 float64
	errs  []error
}

// startCPU starts measuring the CPU of procs and of the host.
func startCPU(procs ...*process) *cpuMeter {
	m := &cpuMeter{procs: procs, self0: selfCPU()}
	m.busy0, _ = hostCPU()
	for _, p := range procs {
		c, err := cpuSeconds(p.Pid())
		m.cpu0 = append(m.cpu0, c)
		m.errs = append(m.errs, err)
	}
	m.t0 = time.Now()
	return m
}

// stop ends the measurement; client is the load generator's CPU seconds
// over it. A process whose CPU could not be read at either end is missing
// from Procs, and the error says which.
func (m *cpuMeter) stop(client float64) (*cpuUse, error) {
	u := &cpuUse{Seconds: time.Since(m.t0).Seconds(), Procs: map[string]float64{}, ClientS: client}
	busy1, _ := hostCPU()
	self1 := selfCPU()
	ours := client + self1 - m.self0
	var errs []error
	for i, p := range m.procs {
		c, err := cpuSeconds(p.Pid())
		if err = errors.Join(m.errs[i], err); err != nil {
			errs = append(errs, fmt.Errorf("CPU of %s: %w", p.Name, err))
			continue
		}
		u.Procs[p.Name] = c - m.cpu0[i]
		ours += c - m.cpu0[i]
	}
	// /proc/stat counts in clock ticks of 1/100 s.
	u.HostBusyS = float64(busy1-m.busy0) / 100
	u.OtherS = max(0, u.HostBusyS-ours)
	return u, errors.Join(errs...)
}

// perGB is a process's CPU seconds per 10^9 bytes (0 when not measured).
func (u *cpuUse) perGB(name string, bytes int64) float64 {
	if u == nil || bytes <= 0 {
		return 0
	}
	c, ok := u.Procs[name]
	if !ok {
		return 0
	}
	return c / (float64(bytes) / 1e9)
}

// cores is the CPU a process used in cores: its CPU seconds over the
// wall time.
func (u *cpuUse) cores(cpuS float64) float64 {
	if u == nil || u.Seconds <= 0 {
		return 0
	}
	return cpuS / u.Seconds
}
