// Package memsink is a pipeline Sink for tests that keeps in memory what a
// pipeline reports: its records and its window summaries, in the order
// they came.
package memsink

import (
	"slices"
	"sync"

	"github.com/flowdedup/flowdedup/record"
)

// Sink keeps every record and window summary it is given. It is safe for
// concurrent use: a test reads it while the pipeline runs.
type Sink struct {
	// WindowsOnly, when set, keeps the window summaries alone: for a
	// test of many records that reads only the summaries.
	WindowsOnly bool

	mu      sync.Mutex
	records []record.Record
	windows []record.WindowSummary
}

// Record keeps a copy of r (none with WindowsOnly).
func (s *Sink) Record(r *record.Record) error {
	if s.WindowsOnly {
		return nil
	}
	s.mu.Lock()
	s.records = append(s.records, *r)
	s.mu.Unlock()
	return nil
}

// Window keeps a copy of w.
func (s *Sink) Window(w *record.WindowSummary) error {
	s.mu.Lock()
	s.windows = append(s.windows, *w)
	s.mu.Unlock()
	return nil
}

// Close does nothing: what was kept stays readable.
func (s *Sink) Close() error { return nil }

// Records returns a copy of the records kept so far.
func (s *Sink) Records() []record.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.records)
}

// Windows returns a copy of the window summaries kept so far.
func (s *Sink) Windows() []record.WindowSummary {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.windows)
}
