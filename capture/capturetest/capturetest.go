// Package capturetest checks that a capture backend keeps the contract of
// capture.Source, as testing/fstest checks an fs.FS: every backend's tests
// call Run with a Backend that opens one of its sources, and the checks
// are the same for all. Next returns the frames sent, in order (and a file
// source ends with io.EOF); Next after Close returns capture.ErrClosed,
// and so does every Next after it; Close may be called again and returns
// nil; a live source's Close wakes a Next blocked in the kernel, which
// returns capture.ErrClosed; the counts of a capture.DropCounter or
// capture.KernelCounter never go down, and a DropCounter still answers
// after Close.
package capturetest

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/internal/testutil"
)

// Backend is what Run needs of a capture backend.
type Backend struct {
	// Open opens a new source for one check, which closes it; cleanup Open
	// registers may close it again (Close is idempotent). A live source is
	// opened to wait without a poll timeout, so that an idle Next blocks
	// until a frame comes or Close. Open, Send and Next run on one
	// goroutine (tests of per-CPU sources pin it in Open).
	Open func(t *testing.T) capture.Source
	// Send makes the source Open returned receive Frames, in order; nil
	// for a file source, whose Open holds them already.
	Send func(t *testing.T, frames [][]byte)
	// Frames are what Next returns after Send, in order: at least one.
	Frames [][]byte
	// Match reports whether p is what Next returns for frame; nil means
	// p.Data equals frame (a source of keys, such as the XDP fast path,
	// matches p.Key instead).
	Match func(p *capture.Packet, frame []byte) bool
	// Live sources never end on their own (no io.EOF) and promise that
	// Close wakes a Next blocked in the kernel; a file source ends with
	// io.EOF after Frames.
	Live bool
	// Close closes the source Open returned as its owner does, and may
	// check what the owner's Close does besides (detach a program); nil
	// means the source's Close.
	Close func(t *testing.T, s capture.Source) error
	// Blocked waits until the goroutine on OS thread tid is blocked in
	// Next; nil means testutil.WaitInPoll (a Next that waits in poll(2)).
	Blocked func(t *testing.T, tid int)
}

// Run runs the checks of capture.Source on b, each a subtest.
func Run(t *testing.T, b Backend) {
	t.Helper()
	if len(b.Frames) == 0 {
		t.Fatal("capturetest: a Backend with no Frames checks no Next")
	}
	t.Run("NextReturnsFrames", func(t *testing.T) { nextReturnsFrames(t, b) })
	t.Run("NextAfterClose", func(t *testing.T) { nextAfterClose(t, b) })
	if b.Live {
		t.Run("CloseWakesBlockedNext", func(t *testing.T) { closeWakesBlockedNext(t, b) })
	}
}

// limit bounds a wait that would hang: no timing assumption.
const limit = time.Minute

func nextReturnsFrames(t *testing.T, b Backend) {
	s := b.Open(t)
	defer b.close(t, s)
	if b.Send != nil {
		b.Send(t, b.Frames)
	}
	c := newCounts(t, s)
	var p capture.Packet
	for i, f := range b.Frames {
		err := next(t, s, &p)
		if err != nil {
			t.Fatalf("Next, for frame %d of %d: %v", i, len(b.Frames), err)
		}
		if b.Match != nil && !b.Match(&p, f) || b.Match == nil && !bytes.Equal(p.Data, f) {
			t.Fatalf("Next, for frame %d of %d: %+v, want % x", i, len(b.Frames), p, f)
		}
		c.check(t)
	}
	if !b.Live {
		if err := s.Next(&p); err != io.EOF {
			t.Errorf("Next after the %d frames: %v, want io.EOF", len(b.Frames), err)
		}
	}
	c.check(t)
}

// next calls Next until it returns something other than
// capture.ErrTimeout (a live source opened with a poll timeout, or a quiet
// pipe), up to limit.
func next(t *testing.T, s capture.Source, p *capture.Packet) error {
	t.Helper()
	var err error
	testutil.WaitFor(t, "a frame", limit, func() bool {
		err = s.Next(p)
		return !errors.Is(err, capture.ErrTimeout)
	})
	return err
}

func nextAfterClose(t *testing.T, b Backend) {
	s := b.Open(t)
	c := newCounts(t, s)
	if err := b.close(t, s); err != nil {
		t.Fatalf("Close: %v", err)
	}
	closed(t, b, s)
	c.checkDropsAfterClose(t)
}

func (b Backend) close(t *testing.T, s capture.Source) error {
	if b.Close != nil {
		return b.Close(t, s)
	}
	return s.Close()
}

// closed checks a closed source: Next returns capture.ErrClosed, twice,
// and Close again returns nil.
func closed(t *testing.T, b Backend, s capture.Source) {
	t.Helper()
	var p capture.Packet
	for i := range 2 {
		if err := s.Next(&p); !errors.Is(err, capture.ErrClosed) {
			t.Errorf("Next %d after Close: %v, want capture.ErrClosed", i+1, err)
		}
	}
	if err := b.close(t, s); err != nil {
		t.Errorf("second Close: %v, want nil", err)
	}
}

// counts follows the counters of a source that has them.
type counts struct {
	s      capture.Source
	drops  uint64
	kernel capture.KernelCounts
}

func newCounts(t *testing.T, s capture.Source) *counts {
	t.Helper()
	c := &counts{s: s}
	c.check(t)
	return c
}

// check reads the counters and fails t when one went down.
func (c *counts) check(t *testing.T) {
	t.Helper()
	if d, ok := c.s.(capture.DropCounter); ok {
		n, err := d.KernelDrops()
		if err != nil {
			t.Fatalf("KernelDrops: %v", err)
		}
		if n < c.drops {
			t.Errorf("KernelDrops went down: %d after %d", n, c.drops)
		}
		c.drops = n
	}
	if k, ok := c.s.(capture.KernelCounter); ok {
		var n capture.KernelCounts
		if err := k.KernelCounts(&n); err != nil {
			t.Fatalf("KernelCounts: %v", err)
		}
		o := c.kernel
		if n.Packets < o.Packets || n.Keyed < o.Keyed || n.Prefiltered < o.Prefiltered || n.RingFull < o.RingFull {
			t.Errorf("KernelCounts went down: %+v after %+v", n, o)
		}
		for reason, v := range o.Errors {
			if n.Errors[reason] < v {
				t.Errorf("KernelCounts.Errors[%q] went down: %d after %d", reason, n.Errors[reason], v)
			}
		}
		c.kernel = n
	}
}

// checkDropsAfterClose: a DropCounter answers after Close, with no fewer
// drops than before.
func (c *counts) checkDropsAfterClose(t *testing.T) {
	t.Helper()
	d, ok := c.s.(capture.DropCounter)
	if !ok {
		return
	}
	if n, err := d.KernelDrops(); err != nil || n < c.drops {
		t.Errorf("KernelDrops after Close = %d, %v; want at least %d, nil", n, err, c.drops)
	}
}
