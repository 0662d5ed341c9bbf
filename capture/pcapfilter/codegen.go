package pcapfilter

// The code generator: the expression tree to classic BPF with short-circuit
// jumps, laid out so that every jump goes forward and fits in 8 bits.

import (
	"fmt"

	"golang.org/x/net/bpf"
)

// insn is an instruction whose jump targets are labels until layout.
type insn struct {
	ins    bpf.Instruction // a plain instruction, or nil for a jump
	cond   bpf.JumpTest    // conditional jump when uncond is false
	val    uint32
	jt, jf int // target labels; an unconditional jump uses jt
	uncond bool
}

type codegen struct {
	code   []insn
	labels []int // label -> index in code of the instruction it marks
}

func (g *codegen) label() int {
	g.labels = append(g.labels, -1)
	return len(g.labels) - 1
}

func (g *codegen) place(l int) { g.labels[l] = len(g.code) }

func (g *codegen) emit(ins bpf.Instruction) { g.code = append(g.code, insn{ins: ins}) }

// gen emits e as code that continues at label t when e holds and at f
// when not. Every label is placed after the jumps that name it, so all
// jumps go forward, as classic BPF requires.
func (g *codegen) gen(e *node, t, f int) {
	switch e.op {
	case opTrue:
		g.code = append(g.code, insn{uncond: true, jt: t})
	case opFalse:
		g.code = append(g.code, insn{uncond: true, jt: f})
	case opNot:
		g.gen(e.l, f, t)
	case opAnd:
		m := g.label()
		g.gen(e.l, m, f)
		g.place(m)
		g.gen(e.r, t, f)
	case opOr:
		m := g.label()
		g.gen(e.l, t, m)
		g.place(m)
		g.gen(e.r, t, f)
	case opTest:
		x := e.test
		switch x.kind {
		case loadAbs:
			g.emit(bpf.LoadAbsolute{Off: x.off, Size: x.size})
		case loadIPv4:
			g.emit(bpf.LoadMemShift{Off: x.ihl})
			g.emit(bpf.LoadIndirect{Off: x.off, Size: x.size})
		case loadLen:
			g.emit(bpf.LoadExtension{Num: bpf.ExtLen})
		}
		if x.mask != 0 {
			g.emit(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: x.mask})
		}
		g.code = append(g.code, insn{cond: x.cond, val: x.val, jt: t, jf: f})
	}
}

// generate turns e into a program that returns snaplen when e holds.
func generate(e *node, snaplen uint32) ([]bpf.Instruction, error) {
	if e.op == opTrue {
		return []bpf.Instruction{bpf.RetConstant{Val: snaplen}}, nil
	}
	var g codegen
	accept, reject := g.label(), g.label()
	g.gen(e, accept, reject)
	g.place(accept)
	g.emit(bpf.RetConstant{Val: snaplen})
	g.place(reject)
	g.emit(bpf.RetConstant{Val: 0})
	return g.layout()
}

// layout resolves labels to jump offsets. An unconditional jump to the next
// instruction disappears; a conditional jump that cannot reach its target
// in the 8-bit offset goes through unconditional jumps, which reach 2^32.
func (g *codegen) layout() ([]bpf.Instruction, error) {
	n := len(g.code)
	// firstLive[i] is the first instruction at or after i that is emitted.
	firstLive := make([]int, n+1)
	dead := make([]bool, n)
	firstLive[n] = n
	for i := n - 1; i >= 0; i-- {
		c := g.code[i]
		if c.ins == nil && c.uncond && firstLive[g.labels[c.jt]] == firstLive[i+1] {
			dead[i] = true
			firstLive[i] = firstLive[i+1]
		} else {
			firstLive[i] = i
		}
	}
	target := func(l int) int { return firstLive[g.labels[l]] }

	long := make([]bool, n)
	pos := make([]int, n+1)
	for {
		p := 0
		for i := range g.code {
			pos[i] = p
			switch {
			case dead[i]:
			case long[i]:
				p += 3
			default:
				p++
			}
		}
		pos[n] = p
		grew := false
		for i, c := range g.code {
			if dead[i] || long[i] || c.ins != nil || c.uncond {
				continue
			}
			if pos[target(c.jt)]-pos[i]-1 > 255 || pos[target(c.jf)]-pos[i]-1 > 255 {
				long[i] = true
				grew = true
			}
		}
		if !grew {
			break
		}
	}
	if pos[n] > MaxInstructions {
		return nil, fmt.Errorf("filter compiles to %d instructions, more than the kernel's %d", pos[n], MaxInstructions)
	}

	prog := make([]bpf.Instruction, 0, pos[n])
	for i, c := range g.code {
		switch {
		case dead[i]:
		case c.ins != nil:
			prog = append(prog, c.ins)
		case c.uncond:
			prog = append(prog, bpf.Jump{Skip: uint32(pos[target(c.jt)] - pos[i] - 1)})
		case long[i]:
			prog = append(prog,
				bpf.JumpIf{Cond: c.cond, Val: c.val, SkipTrue: 0, SkipFalse: 1},
				bpf.Jump{Skip: uint32(pos[target(c.jt)] - pos[i] - 2)},
				bpf.Jump{Skip: uint32(pos[target(c.jf)] - pos[i] - 3)})
		default:
			prog = append(prog, bpf.JumpIf{Cond: c.cond, Val: c.val,
				SkipTrue: uint8(pos[target(c.jt)] - pos[i] - 1), SkipFalse: uint8(pos[target(c.jf)] - pos[i] - 1)})
		}
	}
	return prog, nil
}
