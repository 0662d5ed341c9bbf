package pcapfilter

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/net/bpf"

	"github.com/flowdedup/flowdedup/flow"
)

// FuzzCompile checks that the compiler never panics, that every program
// it returns is one golang.org/x/net/bpf's VM (and so the kernel's checker)
// accepts, and that "not (EXPR)" accepts exactly the frames EXPR rejects
// among frames long enough for every load (in any BPF, a load past the end
// of the frame rejects it, negated or not).
func FuzzCompile(f *testing.F) {
	// Every expression the tcpdump comparison uses: valid ones of each kind.
	for _, expr := range tcpdumpExprs {
		f.Add(expr, uint8(0))
	}
	// The same on raw IP and Linux cooked captures.
	f.Add("port 53 or host 2001:db8::1", uint8(3))
	f.Add("not ip6 and udp", uint8(1))
	f.Add("net 10.1", uint8(2))
	// Errors: syntax, values out of range, unsupported features, an
	// unsupported link type (index 6 is BSD loopback).
	f.Add("tcp udp", uint8(0))
	f.Add("((tcp)", uint8(0))
	f.Add("port 70000", uint8(0))
	f.Add("net 10.1.2.3/8", uint8(0))
	f.Add("tcp[13] & 2 != 0", uint8(0))
	f.Add("vlan and tcp", uint8(0))
	f.Add("host 1.2.3.4 or 5.6.7.8 and not 9.9.9.9", uint8(0))
	f.Add("src or dst or", uint8(0))
	f.Add("arp", uint8(5))
	f.Add("tcp", uint8(6))
	// Long and deep inputs: jump expansion and the nesting bound.
	f.Add(strings.Repeat("port 1 or ", 80)+"port 2", uint8(0))
	f.Add(strings.Repeat("not (", 250)+"ip"+strings.Repeat(")", 250), uint8(0))

	frames := testFrames()
	f.Fuzz(func(t *testing.T, expr string, linkIndex uint8) {
		lt := flow.LinkNull
		if int(linkIndex)%7 < len(linkTypes) {
			lt = linkTypes[int(linkIndex)%7]
		}
		prog, err := compileForVM(t, expr, lt)
		if err != nil {
			var fe *Error
			if !errors.As(err, &fe) && lt != flow.LinkNull {
				t.Fatalf("%q on %v: error %v is not a *Error", expr, lt, err)
			}
			return
		}
		neg, negErr := compileForVM(t, "not ("+expr+")", lt)
		for _, fr := range frames {
			data := wrap(fr, lt)
			if data == nil {
				continue
			}
			got := runVM(t, prog, data)
			if negErr == nil && !strings.HasSuffix(fr.name, "-truncated") && runVM(t, neg, data) == got {
				t.Fatalf("%q on %v, frame %s: the filter and its negation agree (%v)", expr, lt, fr.name, got)
			}
		}
	})
}

// compileForVM compiles expr and checks the program as the kernel would.
func compileForVM(t *testing.T, expr string, lt flow.LinkType) (*bpf.VM, error) {
	raw, err := Compile(expr, lt, 128)
	if err != nil {
		return nil, err
	}
	if len(raw) == 0 || len(raw) > MaxInstructions {
		t.Fatalf("%q: %d instructions", expr, len(raw))
	}
	prog, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatalf("%q: program does not disassemble", expr)
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatalf("%q: VM rejects the program: %v\n%s", expr, err, listing(prog))
	}
	return vm, nil
}

func runVM(t *testing.T, vm *bpf.VM, data []byte) bool {
	n, err := vm.Run(data)
	if err != nil {
		t.Fatalf("VM: %v", err)
	}
	if n != 0 && n != 128 {
		t.Fatalf("VM returned %d: neither 0 nor the snap length", n)
	}
	return n > 0
}
