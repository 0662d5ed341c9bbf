//go:build linux && !(mips || mips64 || ppc64 || s390x)

package bpf_test

import (
	"reflect"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"github.com/flowdedup/flowdedup/bpf"
	"github.com/flowdedup/flowdedup/flow"
)

// member is a struct member as the Go side expects it: name, byte offset,
// byte size.
type member struct {
	name      string
	off, size uint32
}

// checkStruct compares the BTF of struct name with want and its size.
func checkStruct(t *testing.T, spec *ebpf.CollectionSpec, name string, size uint32, want []member) {
	t.Helper()
	var s *btf.Struct
	if err := spec.Types.TypeByName(name, &s); err != nil {
		t.Errorf("struct %s: %v", name, err)
		return
	}
	if s.Size != size {
		t.Errorf("struct %s: %d bytes, want %d", name, s.Size, size)
	}
	if len(s.Members) != len(want) {
		t.Errorf("struct %s: %d members, want %d", name, len(s.Members), len(want))
		return
	}
	for i, m := range s.Members {
		sz, err := btf.Sizeof(m.Type)
		if err != nil {
			t.Errorf("struct %s member %s: %v", name, m.Name, err)
			continue
		}
		got := member{m.Name, m.Offset.Bytes(), uint32(sz)}
		if got != want[i] {
			t.Errorf("struct %s member %d: %+v, want %+v", name, i, got, want[i])
		}
	}
}

// TestLayout checks the structs of flowdedup.h in the compiled object's BTF
// against the sizes and layouts the Go side decodes.
func TestLayout(t *testing.T) {
	spec, err := bpf.LoadSpec()
	if err != nil {
		t.Fatal(err)
	}
	checkStruct(t, spec, "fd_key", bpf.KeyBytes, []member{
		// flow.Key.AppendBinary's layout.
		{"src", 0, 16}, {"dst", 16, 16}, {"sport", 32, 2}, {"dport", 34, 2},
		{"proto", 36, 1}, {"kind", 37, 1}, {"flags", 38, 1}, {"bits", 39, 1}, {"seg", 40, 4},
	})
	checkStruct(t, spec, "fd_event", bpf.EventSize, []member{
		// DecodeEvent: the time, then the key.
		{"time_ns", 0, 8}, {"key", 8, bpf.KeyBytes},
	})
	checkStruct(t, spec, "fd_row", bpf.RowBytes, []member{{"epoch", 0, 4}, {"fp", 4, 28}})
	checkStruct(t, spec, "fd_config", 8, []member{{"clock_offset_ns", 0, 8}})

	// Counters: the uint64 fields of bpf.Counters in order, Errors last.
	var cm []member
	ct := reflect.TypeFor[bpf.Counters]()
	names := map[string]string{"Packets": "packets", "Keyed": "keyed", "PrefilterHits": "prefilter_hits",
		"Emitted": "emitted", "RingFull": "ring_full", "Errors": "errors"}
	for i := range ct.NumField() {
		f := ct.Field(i)
		cm = append(cm, member{names[f.Name], uint32(f.Offset), uint32(f.Type.Size())})
	}
	checkStruct(t, spec, "fd_counters", uint32(ct.Size()), cm)
	cs := uint32(ct.Size())
	checkStruct(t, spec, "fd_cpu", cs+24, []member{
		// Objects.Counters and CPUWindows.
		{"window", 0, 8}, {"start_ns", 8, 8}, {"end_ns", 16, 8}, {"total", 24, cs},
	})
	checkStruct(t, spec, "fd_window", 8+cs, []member{{"window", 0, 8}, {"counts", 8, cs}})
	for i, err := range bpf.Errs {
		if r := flow.Reason(err); r != bpf.Reasons[i] {
			t.Errorf("error class %d: Reasons says %q, flow.Reason(%v) %q", i, bpf.Reasons[i], err, r)
		}
	}
	if n := len(bpf.Errs); n != bpf.NumErrs {
		t.Errorf("%d Errs, want NumErrs = %d", n, bpf.NumErrs)
	}

	// The maps the loader and capture/xdp rely on.
	for name, want := range map[string]struct {
		typ        ebpf.MapType
		value      uint32
		valueBytes uint32
	}{
		"fd_rings":     {ebpf.ArrayOfMaps, 4, 4},
		"fd_cpu":       {ebpf.PerCPUArray, 136, 136},
		"fd_windows":   {ebpf.PerCPUArray, 120, 120},
		"fd_prefilter": {ebpf.PerCPUArray, bpf.RowBytes, bpf.RowBytes},
		"fd_config":    {ebpf.Array, 8, 8},
	} {
		m, ok := spec.Maps[name]
		if !ok {
			t.Errorf("no map %s", name)
			continue
		}
		if m.Type != want.typ || m.KeySize != 4 || m.ValueSize != want.value {
			t.Errorf("map %s: %v, key %d bytes, value %d bytes; want %v, 4, %d", name, m.Type, m.KeySize, m.ValueSize, want.typ, want.value)
		}
	}
	if n := spec.Maps["fd_windows"].MaxEntries; n != bpf.WindowSlots {
		t.Errorf("fd_windows has %d slots, want WindowSlots = %d", n, bpf.WindowSlots)
	}
	if in := spec.Maps["fd_rings"].InnerMap; in == nil || in.Type != ebpf.RingBuf {
		t.Errorf("fd_rings' inner map: %+v, want a ring buffer", in)
	}
	if v, ok := spec.Variables["fd_floor_ns"]; !ok || v.Size() != 8 || v.Constant() {
		t.Errorf("variable fd_floor_ns: %+v, want 8 bytes, writable", v)
	}
	for name, size := range map[string]uint32{"fd_key_kind": 1, "fd_hash_seed": 8, "fd_window_ns": 8, "fd_prefilter_rows": 4,
		"fd_prefix": 1, "fd_prefix_v4": 1, "fd_prefix_v6": 1, "fd_mask4": 4, "fd_mask6": 16,
		"fd_decap": 1, "fd_vxlan_ports": 4, "fd_geneve_port": 2, "fd_gtpu_port": 2, "fd_segment": 1} {
		v, ok := spec.Variables[name]
		if !ok {
			t.Errorf("no variable %s", name)
			continue
		}
		if v.Size() != size || !v.Constant() {
			t.Errorf("variable %s: %d bytes, constant %v; want %d bytes, constant", name, v.Size(), v.Constant(), size)
		}
	}
}
