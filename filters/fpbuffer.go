package filters

import (
	"fmt"
	"strconv"

	"github.com/flowdedup/flowdedup/mix"
)

// fpbufferDefaultQ is the SBF paper's FPS = 10% (Sec. 5.2: Max=1, K=2,
// P=4 for FPS=10%), the sbf family's default fps: FPBuffering exists to be
// compared with an SBF at an equal FP rate, so by default it matches the
// default SBF's.
const fpbufferDefaultQ = 0.1

var fpbufferFamily = &Family{
	Name:  "fpbuffer",
	Paper: "Deng & Rafiei, SIGMOD 2006, Sec. 5.2 (FPBuffering)",
	About: "LRU buffering that also answers duplicate with probability q on a miss, so it can be compared with an SBF at an equal FP rate",
	Params: []Param{memParam,
		{Name: "entries", Default: "", Help: "buffer entries (overrides mem; mem = 64*entries)"},
		{Name: "q", Default: "0.1", Help: "probability in [0, 1] of answering duplicate on a miss: the FP rate (0.1: the SBF paper's FPS)"},
	},
	build: buildFPBuffer,
}

// FPBuffer is FPBuffering (SBF paper, Sec. 5.2): an LRU buffer that reports
// a duplicate when it holds the element, and otherwise reports a duplicate
// with probability q, drawn from the filter's own random source. The buffer
// is updated exactly as LRU's is whatever the answer, so on one stream an
// FPBuffer and an LRU of the same size hit and miss on the same elements:
//
//	FPR = q                 (a distinct element always misses)
//	FNR = FNR_LRU * (1 - q) (a duplicate is missed only when the LRU misses
//	                         it and the coin says distinct)
//
// Memory is the LRU's, 64 bits per entry as the SBF paper counts it; q's
// coin is not state.
type FPBuffer struct {
	lru  *LRU
	q    float64
	rng  mix.Wyrand
	seed uint64
}

var _ Filter = (*FPBuffer)(nil)

func buildFPBuffer(p *params, seed uint64) (Filter, error) {
	q, err := p.float("q", fpbufferDefaultQ, 0, 1)
	if err != nil {
		return nil, err
	}
	l, err := buildLRU(p, seed)
	if err != nil {
		return nil, err
	}
	return &FPBuffer{lru: l.(*LRU), q: q, rng: mix.NewWyrand(seed), seed: seed}, nil
}

// Observe reports a duplicate if h is buffered, else with probability q;
// either way h becomes the most recent entry of the buffer.
func (f *FPBuffer) Observe(h uint64) bool {
	if f.lru.Observe(h) {
		return true
	}
	return f.rng.Float64() < f.q
}

// SizeBits is the LRU's: 64 bits per entry.
func (f *FPBuffer) SizeBits() int { return f.lru.SizeBits() }

// Reset empties the buffer and rewinds the random source.
func (f *FPBuffer) Reset() {
	f.lru.Reset()
	f.rng = mix.NewWyrand(f.seed)
}

// String gives the canonical spec, e.g. "fpbuffer:mem=64KiB,q=0.1".
func (f *FPBuffer) String() string {
	q := strconv.FormatFloat(f.q, 'g', -1, 64)
	if f.lru.memBits > 0 {
		return fmt.Sprintf("fpbuffer:mem=%s,q=%s", FormatMem(f.lru.memBits), q)
	}
	return fmt.Sprintf("fpbuffer:entries=%d,q=%s", f.lru.cap, q)
}

// Q is the probability of answering duplicate on a miss.
func (f *FPBuffer) Q() float64 { return f.q }

// Entries is the buffer's capacity.
func (f *FPBuffer) Entries() int { return f.lru.cap }
