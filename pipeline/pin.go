package pipeline

import (
	"fmt"
	"sync"

	"github.com/flowdedup/flowdedup/pipeline/internal/affinity"
)

// pinner binds goroutines to CPUs, round robin over the CPUs the process
// may use (Config.Pin). A pinner made with pinning off does nothing. Its
// first error is kept for Run to return: a goroutine that could not be
// pinned still runs, unpinned.
type pinner struct {
	cpus []int // nil: pinning off or impossible

	once    sync.Once
	failure error
}

func newPinner(enabled bool) *pinner {
	p := &pinner{}
	if !enabled {
		return p
	}
	cpus, err := affinity.Allowed()
	if err != nil || len(cpus) == 0 {
		p.failure = fmt.Errorf("pipeline: pin: %w", err)
		return p
	}
	p.cpus = cpus
	return p
}

// pin binds the calling goroutine's thread to the i-th CPU (modulo their
// number). It must be called from the goroutine to pin. Safe for
// concurrent use.
func (p *pinner) pin(i int) {
	if p.cpus == nil {
		return
	}
	if err := affinity.Pin(p.cpus[i%len(p.cpus)]); err != nil {
		p.once.Do(func() { p.failure = fmt.Errorf("pipeline: %w", err) })
	}
}

// err returns the first error of pinning, once every pin call has
// returned.
func (p *pinner) err() error { return p.failure }
