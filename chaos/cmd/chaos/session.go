package main

import (
	"fmt"
	"os"
	"sync"
)

// session is the chaos.TB of a run outside go test: log lines go to stdout, Errorf marks the
// run failed, Fatal, Fatalf and Skipf panic with a fatal (runChaos recovers it), temp dirs are
// made in the run's directory, and close runs the cleanups, last registered first.
type session struct {
	dir  string
	keep bool // keep the temp dirs

	mu       sync.Mutex
	cleanups []func()
	failed   bool
	closed   bool
}

// fatal is what Fatal panics with.
type fatal string

func (s *session) Helper() {}

func (s *session) Logf(format string, args ...any) { fmt.Printf(format+"\n", args...) }

func (s *session) Errorf(format string, args ...any) {
	s.mu.Lock()
	s.failed = true
	s.mu.Unlock()
	fmt.Fprintf(os.Stderr, "chaos: "+format+"\n", args...)
}

func (s *session) Fatal(args ...any) { panic(fatal(fmt.Sprint(args...))) }

func (s *session) Fatalf(format string, args ...any) { panic(fatal(fmt.Sprintf(format, args...))) }

func (s *session) Skipf(format string, args ...any) { panic(fatal(fmt.Sprintf(format, args...))) }

func (s *session) Cleanup(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, f)
}

func (s *session) TempDir() string {
	dir, err := os.MkdirTemp(s.dir, "silo-data-")
	if err != nil {
		s.Fatalf("temp dir: %v", err)
	}
	if !s.keep {
		s.Cleanup(func() { _ = os.RemoveAll(dir) })
	}
	return dir
}

// close runs the cleanups, last registered first, once; a cleanup that panics is reported and
// the others still run.
func (s *session) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	cleanups := s.cleanups
	s.cleanups = nil
	s.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		func() {
			defer func() {
				if v := recover(); v != nil {
					s.Errorf("cleanup: %v", v)
				}
			}()
			cleanups[i]()
		}()
	}
}
