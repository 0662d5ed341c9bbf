package capturetest

import (
	"errors"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/internal/testutil"
)

// closeWakesBlockedNext closes a live source while its Next waits: Close
// must wake a Next that sleeps in the kernel, not one that has not got
// there yet, so the check waits until it is blocked first.
func closeWakesBlockedNext(t *testing.T, b Backend) {
	s := b.Open(t)
	errc := make(chan error, 1)
	tid := testutil.OnThread(func() {
		var p capture.Packet
		errc <- s.Next(&p)
	})
	if b.Blocked != nil {
		b.Blocked(t, tid)
	} else {
		testutil.WaitInPoll(t, tid, limit)
	}
	select {
	case err := <-errc:
		t.Fatalf("Next returned %v with no frame and no poll timeout", err)
	default:
	}
	if err := b.close(t, s); err != nil {
		t.Errorf("Close: %v", err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, capture.ErrClosed) {
			t.Errorf("blocked Next returned %v after Close, want capture.ErrClosed", err)
		}
	case <-time.After(limit):
		t.Fatalf("Next still blocked %v after Close", limit)
	}
	closed(t, b, s)
}
