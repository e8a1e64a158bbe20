package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is the unit of the CPU times in /proc/PID/stat. Linux reports
// them in USER_HZ, which is 100 on every architecture Go supports.
const clockTick = 10 * time.Millisecond

// procStat is what one line of /proc/PID/stat says that a measurement
// needs.
type procStat struct {
	comm string
	ppid int
	cpu  time.Duration // user + system of the process and of the children it reaped
}

// parseStat reads one /proc/PID/stat line. The command name is in
// parentheses and may itself hold spaces and parentheses, so the fields
// are counted from the last closing parenthesis.
func parseStat(line string) (procStat, error) {
	open, end := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
	if open < 0 || end < open {
		return procStat{}, fmt.Errorf("parse /proc stat %q: no command name in parentheses", line)
	}
	f := strings.Fields(line[end+1:])
	// f[0] is field 3 (state); ppid is field 4, utime..cstime fields 14..17.
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("parse /proc stat %q: %d fields after the command name, want at least 15", line, len(f))
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return procStat{}, fmt.Errorf("parse /proc stat ppid %q: %w", f[1], err)
	}
	var ticks int64
	for _, s := range f[11:15] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("parse /proc stat CPU time %q: %w", s, err)
		}
		ticks += v
	}
	return procStat{comm: line[open+1 : end], ppid: ppid, cpu: time.Duration(ticks) * clockTick}, nil
}

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, fmt.Errorf("read stat of %d: %w", pid, err)
	}
	return parseStat(strings.TrimSpace(string(b)))
}

// cpuOf is the CPU a long-lived process (a server, a store) has spent so
// far; a measurement takes the difference over its run.
func cpuOf(pid int) (time.Duration, error) {
	s, err := readStat(pid)
	return s.cpu, err
}

// rusageCPU is user + system of an exited child and of every descendant it
// waited for, as wait4 reports it: a launcher's wrappers, a worker's
// commands.
func rusageCPU(cmd *exec.Cmd) time.Duration {
	if cmd.ProcessState == nil {
		return 0
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// vmRSS is a process's resident set in kB, as /proc/PID/status says.
func vmRSS(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read status of %d: %w", pid, err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) == 0 {
				break
			}
			return strconv.Atoi(f[0])
		}
	}
	return 0, fmt.Errorf("read status of %d: no VmRSS (a zombie or a kernel thread)", pid)
}

// pssOf is a process's proportional set size in kB (/proc/PID/smaps_rollup):
// its private pages, and its share of the pages it shares. Summed over a
// system's processes it counts the pages of a binary that a hundred
// wrappers share once, where VmRSS counts them a hundred times.
func pssOf(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, fmt.Errorf("read smaps_rollup of %d: %w", pid, err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Pss:"); ok {
			f := strings.Fields(v)
			if len(f) == 0 {
				break
			}
			return strconv.Atoi(f[0])
		}
	}
	return 0, fmt.Errorf("read smaps_rollup of %d: no Pss", pid)
}

// processes maps every process on the machine to its stat line; those
// that end while it reads are left out.
func processes() map[int]procStat {
	out := map[int]procStat{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if s, err := readStat(pid); err == nil {
			out[pid] = s
		}
	}
	return out
}

// treeMemory is the resident memory of the processes rooted at roots and
// all their descendants, leaving out those named leaf (the activities'
// own commands, which are the same on both sides), and how many of those
// leaves it found.
type treeMemory struct {
	kB     int // VmRSS: every page a process maps, shared ones counted in each sharer
	pssKB  int // Pss: each shared page divided among the processes sharing it
	procs  int
	leaves int
}

func memoryOfTrees(all map[int]procStat, leaf string, roots ...int) treeMemory {
	children := map[int][]int{}
	for pid, s := range all {
		children[s.ppid] = append(children[s.ppid], pid)
	}
	var m treeMemory
	seen := map[int]bool{}
	queue := append([]int(nil), roots...)
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		queue = append(queue, children[pid]...)
		if s, ok := all[pid]; ok && s.comm == leaf {
			m.leaves++
			continue
		}
		if kb, err := vmRSS(pid); err == nil {
			m.kB += kb
			m.procs++
			if pss, err := pssOf(pid); err == nil {
				m.pssKB += pss
			}
		}
	}
	return m
}

// findProcess is the pid of the process whose command line holds every
// one of words as an argument, or 0.
func findProcess(words ...string) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if holdsAll(args, words) {
			return pid
		}
	}
	return 0
}

func holdsAll(args, words []string) bool {
	for _, w := range words {
		found := false
		for _, a := range args {
			if a == w || strings.HasSuffix(a, "/"+w) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// loadAverage is the machine's one-minute load average.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
