package pipeline

import (
	"runtime"
	"sync/atomic"
)

// spinRounds is how many times a goroutine that found nothing to do yields
// (runtime.Gosched) and looks again before it parks. Parking and waking
// cost a few microseconds of the waker's time (the runtime may have to wake
// an OS thread); a batch of 256 keys takes a producer 10 to 20 µs, so a
// short spin lets a worker that is faster than its producers pick up the
// next batch without a wake-up, while yielding keeps the spin from starving
// other goroutines on a machine with fewer cores than goroutines.
const spinRounds = 64

// parker puts one goroutine to sleep until another has something for it.
// The waker pays one atomic load per event (a batch published, a slot
// released) and a channel send only when the sleeper is actually parked:
// there is no channel operation per packet, nor per batch while both sides
// are busy.
//
// Protocol (a Dekker-style handshake; Go's atomics are sequentially
// consistent): the sleeper sets waiting, then rechecks its condition, then
// blocks on ch; the waker changes the condition, then loads waiting. At
// least one of the two sees the other's write, so a wake-up is never lost.
type parker struct {
	_       cacheLinePad
	waiting atomic.Bool
	ch      chan struct{} // capacity 1
	_       cacheLinePad
}

func newParker() *parker { return &parker{ch: make(chan struct{}, 1)} }

// wake wakes the sleeper if it is parked or about to park. Any goroutine.
func (p *parker) wake() {
	if p.waiting.Load() && p.waiting.CompareAndSwap(true, false) {
		p.ch <- struct{}{} // never blocks: one token per successful CAS, and the sleeper takes each
	}
}

// park blocks until ready returns true. ready is called again after
// announcing the intent to sleep, so a wake between the caller's last check
// and the sleep is not lost. Sleeper only.
func (p *parker) park(ready func() bool) {
	for spin := 0; spin < spinRounds; spin++ {
		runtime.Gosched()
		if ready() {
			return
		}
	}
	for {
		p.waiting.Store(true)
		if ready() {
			if !p.waiting.CompareAndSwap(true, false) {
				<-p.ch // a waker won the CAS: take its token so the next park starts clean
			}
			return
		}
		<-p.ch
		if ready() {
			return
		}
	}
}
