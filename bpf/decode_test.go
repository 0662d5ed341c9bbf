//go:build linux && !(mips || mips64 || ppc64 || s390x)

package bpf_test

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/bpf"
	"github.com/flowdedup/flowdedup/flow"
)

func TestDecodeEvent(t *testing.T) {
	k := flow.MakeKey(flow.Key5Tuple, netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2"), 6, 1234, 80)
	rec := binary.NativeEndian.AppendUint64(nil, uint64(1767225600123456789))
	rec, _ = k.AppendBinary(rec)
	rec = append(rec, make([]byte, bpf.EventSize-len(rec))...) // no segment, padding
	got, ts, err := bpf.DecodeEvent(rec)
	if err != nil || got != k || ts != 1767225600123456789 {
		t.Errorf("DecodeEvent = %v, %d, %v; want %v, 1767225600123456789, nil", got, ts, err, k)
	}
	if n := testing.AllocsPerRun(100, func() { bpf.DecodeEvent(rec) }); n != 0 {
		t.Errorf("DecodeEvent allocates %v times", n)
	}
	for _, b := range [][]byte{nil, rec[:bpf.EventSize-1], append(rec[:bpf.EventSize:bpf.EventSize], 0)} {
		if _, _, err := bpf.DecodeEvent(b); err == nil {
			t.Errorf("DecodeEvent(%d bytes) succeeded", len(b))
		}
	}
	bad := append([]byte(nil), rec...)
	bad[8+37] = 0 // kind 0
	if _, _, err := bpf.DecodeEvent(bad); !errors.Is(err, flow.ErrBadKey) {
		t.Errorf("DecodeEvent(kind 0) = %v, want ErrBadKey", err)
	}
}

// TestLoadConfig checks the errors Load returns for bad configurations,
// which it finds before asking anything of the kernel.
func TestLoadConfig(t *testing.T) {
	page := os.Getpagesize()
	for _, c := range []struct {
		cfg  bpf.Config
		want string
	}{
		{bpf.Config{}, "invalid key kind"},
		{bpf.Config{Kind: 5}, "invalid key kind"},
		{bpf.Config{Kind: flow.KeySrc, Window: -time.Second}, "negative window"},
		{bpf.Config{Kind: flow.KeySrc, PrefilterBytes: bpf.RowBytes - 1}, "holds no"},
		{bpf.Config{Kind: flow.KeySrc, RingBytes: page / 2}, "page size"},
		{bpf.Config{Kind: flow.KeySrc, RingBytes: 3 * page}, "power of two"},
		{bpf.Config{Kind: flow.KeySrc, RingBytes: -page}, "power of two"},
	} {
		o, err := bpf.Load(c.cfg)
		if err == nil {
			o.Close()
			t.Errorf("Load(%+v) succeeded", c.cfg)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("Load(%+v) = %v, want an error saying %q", c.cfg, err, c.want)
		}
	}
}
