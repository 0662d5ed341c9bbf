package filters

import (
	"errors"
	"runtime"
	"testing"
)

// allocated returns the bytes New(spec) allocates, the least of three
// tries so that a stray allocation of the runtime does not count.
func allocated(t *testing.T, spec string) int64 {
	t.Helper()
	least := int64(-1)
	for range 3 {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		f, err := New(spec, 1)
		runtime.ReadMemStats(&m1)
		if err != nil {
			t.Fatalf("New(%q): %v", spec, err)
		}
		runtime.KeepAlive(f)
		if n := int64(m1.TotalAlloc - m0.TotalAlloc); least < 0 || n < least {
			least = n
		}
	}
	return least
}

// Footprint bounds what New really allocates, and not loosely: every
// family at a few sizes, the LRU buffers with entry counts on both sides of
// a power of two (their index table doubles there).
func TestFootprintBoundsAllocation(t *testing.T) {
	var specs []string
	for _, name := range Names() {
		if name == "exact" {
			continue
		}
		for _, mem := range []string{"64KiB", "1MiB", "1000000B"} {
			specs = append(specs, name+":mem="+mem)
		}
	}
	specs = append(specs, "bloom:mem=1MiB,blocked=1", "sbf:mem=1000000B,blocked=1", "sbf:mem=64KiB,max=7,blocked=1")
	specs = append(specs, "lru:entries=1024", "lru:entries=1025", "fpbuffer:entries=4095", "lru:entries=1")
	for _, spec := range specs {
		got := allocated(t, spec)
		fp, bounded, err := Footprint(spec)
		if err != nil || !bounded {
			t.Fatalf("Footprint(%q) = %d, %v, %v", spec, fp, bounded, err)
		}
		if got > fp {
			t.Errorf("%s: New allocated %d bytes, Footprint says at most %d", spec, got, fp)
		}
		// cuckoo rounds its table down to a power of two buckets, so it can
		// use little more than half its mem; nothing uses less.
		if got < (fp-footprintFixed)/2 {
			t.Errorf("%s: New allocated %d bytes, Footprint %d is a loose bound", spec, got, fp)
		}
	}
}

func TestFootprintErrors(t *testing.T) {
	if fp, bounded, err := Footprint("exact"); fp != 0 || bounded || err != nil {
		t.Errorf("exact: %d, %v, %v; want 0, unbounded", fp, bounded, err)
	}
	// The largest filter is counted, never allocated.
	if fp, _, err := Footprint("qht:mem=" + FormatMem(maxMemBits) + ",buckets=4"); err != nil || fp != maxMemBits/8+footprintFixed {
		t.Errorf("qht:mem=%s: %d, %v", FormatMem(maxMemBits), fp, err)
	}
	for _, c := range []struct {
		spec string
		want error
	}{
		{"nosuch", ErrUnknownFilter},
		{"qht:mem=lots", ErrBadParam},
		{"lru:entries=0", ErrBadParam},
		{"qht:", ErrSyntax},
	} {
		if _, _, err := Footprint(c.spec); !errors.Is(err, c.want) {
			t.Errorf("Footprint(%q): %v, want %v", c.spec, err, c.want)
		}
	}
}
