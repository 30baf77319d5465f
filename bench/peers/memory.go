package main

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// memorySampleEvery is how often the server's memory is sampled.
const memorySampleEvery = 250 * time.Millisecond

// pssBytes is the proportional set size of process pid (Pss in /proc/PID/smaps_rollup): its
// private pages plus its share of each page it shares. A process that has gone counts 0.
func pssBytes(pid int) uint64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0
	}
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		fields := strings.Fields(string(line))
		if len(fields) >= 2 && fields[0] == "Pss:" {
			kb, _ := strconv.ParseUint(fields[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// descendants returns the processes whose chain of parents reaches root, root excluded.
func descendants(root int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name, in parentheses, may hold spaces: the fields after its ")" are
		// state, ppid, ...
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		children[ppid] = append(children[ppid], pid)
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		next := queue[0]
		queue = queue[1:]
		out = append(out, children[next]...)
		queue = append(queue, children[next]...)
	}
	return out
}

// memorySampler records the peak, over samples every memorySampleEvery, of the summed PSS of
// the processes pids returns at each sample.
type memorySampler struct {
	stopOnce sync.Once
	stopping chan struct{}
	done     chan struct{}
	peak     uint64
}

// sampleMemory starts sampling pids at once.
func sampleMemory(pids func() []int) *memorySampler {
	m := &memorySampler{stopping: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		ticker := time.NewTicker(memorySampleEvery)
		defer ticker.Stop()
		for {
			var sum uint64
			for _, pid := range pids() {
				sum += pssBytes(pid)
			}
			m.peak = max(m.peak, sum)
			select {
			case <-m.stopping:
				return
			case <-ticker.C:
			}
		}
	}()
	return m
}

// stop ends the sampling and returns the peak in MiB.
func (m *memorySampler) stop() float64 {
	m.stopOnce.Do(func() { close(m.stopping) })
	<-m.done
	return float64(m.peak) / (1 << 20)
}
