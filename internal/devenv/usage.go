package devenv

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// clockTicks is USER_HZ, the unit of the CPU times in /proc/<pid>/stat: 100
// on every Linux architecture Go supports.
const clockTicks = 100

// Usage is the CPU and memory one workload process has used.
type Usage struct {
	WorkloadProcess
	// CPU is the processor time (user and system) used since it started,
	// over Age.
	CPU, Age time.Duration
	// Recent is the number of cores it used over the sampling window.
	Recent float64
	// RSS is its resident memory in bytes.
	RSS int64
}

// MeasureWorkloads samples the CPU time of procs twice, window apart, and
// reads their resident memory. A process that is gone is left out.
func MeasureWorkloads(ctx context.Context, procs []WorkloadProcess, window time.Duration) ([]Usage, error) {
	first := map[int]time.Duration{}
	for _, p := range procs {
		if cpu, _, err := cpuTime(p.PID); err == nil {
			first[p.PID] = cpu
		}
	}
	start := time.Now()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(window): // the sampling window itself
	}
	elapsed := time.Since(start)
	var out []Usage
	for _, p := range procs {
		before, ok := first[p.PID]
		if !ok {
			continue
		}
		cpu, age, err := cpuTime(p.PID)
		if err != nil {
			continue
		}
		rss, err := residentBytes(p.PID)
		if err != nil {
			continue
		}
		out = append(out, Usage{WorkloadProcess: p, CPU: cpu, Age: age, RSS: rss,
			Recent: (cpu - before).Seconds() / elapsed.Seconds()})
	}
	return out, nil
}

// PrintUsage writes a table of usage with a total line.
func PrintUsage(w io.Writer, usage []Usage, window time.Duration) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "CLUSTER\tPROCESS\tCPU-SINCE-START\tCORES-AVG\tCORES-LAST-%s\tRSS\n", window.Round(time.Second))
	var cpu, age time.Duration
	var recent float64
	var rss int64
	for _, u := range usage {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%.2f\t%d MiB\n", u.Cluster, u.Name, u.CPU.Round(100*time.Millisecond),
			cores(u.CPU, u.Age), u.Recent, u.RSS>>20)
		cpu += u.CPU
		age = max(age, u.Age)
		recent += u.Recent
		rss += u.RSS
	}
	fmt.Fprintf(tw, "total\t%d processes\t%s\t%.2f\t%.2f\t%d MiB\n", len(usage), cpu.Round(100*time.Millisecond), cores(cpu, age), recent, rss>>20)
	return tw.Flush()
}

func cores(cpu, over time.Duration) float64 {
	if over <= 0 {
		return 0
	}
	return cpu.Seconds() / over.Seconds()
}

// cpuTime reads a process's user and system time and its age from
// /proc/<pid>/stat.
func cpuTime(pid int) (cpu, age time.Duration, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields that follow are counted from the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state): utime is field 14, stime 15, starttime 22.
	if len(f) < 20 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	started, err3 := strconv.ParseInt(f[19], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, 0, fmt.Errorf("/proc/%d/stat: unexpected fields", pid)
	}
	up, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return 0, 0, err
	}
	uptime, err := strconv.ParseFloat(strings.Fields(string(up))[0], 64)
	if err != nil {
		return 0, 0, err
	}
	tick := time.Second / clockTicks
	age = time.Duration(uptime*float64(time.Second)) - time.Duration(started)*tick
	return time.Duration(utime+stime) * tick, age, nil
}

// residentBytes reads VmRSS from /proc/<pid>/status.
func residentBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}
