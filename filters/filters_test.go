package filters

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/flowdedup/flowdedup/mix"
)

// testHash is the i-th hash of a test stream: distinct i give distinct,
// uniform-looking hashes (mix.Mix64 is a bijection); salt picks the stream.
//
// The tests' streams come from splitmix64 (testHash, mix.SplitMix), a
// different generator from the filters' own (mix.Wyrand), so that a stream
// cannot correlate with a filter's random choices; splitmix64's values are
// distinct, a bijection of a counter, so a stream has no duplicates by
// accident.
func testHash(i, salt uint64) uint64 { return mix.Mix64(i*mix.Golden + salt) }

// mustNew builds the filter spec names and asserts its concrete type.
func mustNew[T Filter](t testing.TB, spec string, seed uint64) T {
	t.Helper()
	f, err := New(spec, seed)
	if err != nil {
		t.Fatalf("New(%q): %v", spec, err)
	}
	c, ok := f.(T)
	if !ok {
		t.Fatalf("New(%q) is a %T, want %T", spec, f, c)
	}
	return c
}

// testSpecs builds one small spec per registered family, and one more
// for its blocked layout when it has one, so every test below covers each
// filter as soon as it is registered.
func testSpecs(mem string) []string {
	var specs []string
	for _, f := range Families() {
		if f.Name == "exact" {
			specs = append(specs, "exact")
			continue
		}
		specs = append(specs, f.Name+":mem="+mem)
		for _, p := range f.Params {
			if p.Name == "blocked" {
				specs = append(specs, f.Name+":mem="+mem+",blocked=1")
			}
		}
	}
	return specs
}

func TestParseMem(t *testing.T) {
	good := map[string]int{
		"65536bit": 65536, "8KiB": 65536, "8kib": 65536, "1B": 8, "3MiB": 3 << 23,
		"128MiB": 1 << 30, "0.5KiB": 4096, " 2KiB ": 16384,
	}
	// A bare number is refused (package units): bits, bytes or KiB?
	bad := []string{"", "KiB", "-1KiB", "0", "100", "1.5bit", "8b", "8kb", "1TiB", "1e30GiB", "NaNbit", "x"}
	if strconv.IntSize == 64 {
		gib := int64(8) << 30 // a variable: the constant does not fit a 32-bit int
		good["1GiB"] = int(gib)
		good["128GiB"] = int(gib * 128)
		bad = append(bad, "129GiB")
	} else {
		// 32-bit platforms: bit counts are ints, so the limit is 2^30 bits.
		bad = append(bad, "129MiB", "1GiB")
	}
	for s, want := range good {
		got, err := ParseMem(s)
		if err != nil || got != want {
			t.Errorf("ParseMem(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range bad {
		if got, err := ParseMem(s); err == nil {
			t.Errorf("ParseMem(%q) = %d, want an error", s, got)
		}
	}
	if got, err := ParseMem("auto"); err != nil || got <= 0 || got%8 != 0 {
		t.Errorf("ParseMem(auto) = %d, %v; want a positive number of bytes", got, err)
	}
}

func TestFormatMemRoundTrip(t *testing.T) {
	for _, bits := range []int{1, 7, 8, 65536, 65544, 8 << 20, 3 << 23, maxMemBits, 12345} {
		s := FormatMem(bits)
		got, err := ParseMem(s)
		if err != nil || got != bits {
			t.Errorf("FormatMem(%d) = %q, parses back to %d, %v", bits, s, got, err)
		}
	}
	if s := FormatMem(65536); s != "8KiB" {
		t.Errorf("FormatMem(65536) = %q, want the largest exact unit 8KiB", s)
	}
}

func TestNewErrors(t *testing.T) {
	cases := []struct {
		spec string
		want error
	}{
		{"", ErrSyntax},
		{":mem=1KiB", ErrSyntax},
		{"lru:", ErrSyntax},
		{"lru:mem", ErrSyntax},
		{"lru:mem=1KiB,mem=2KiB", ErrSyntax},
		{"nosuch", ErrUnknownFilter},
		{"lru:colour=blue", ErrUnknownParam},
		{"exact:mem=1KiB", ErrUnknownParam},
		{"lru:mem=12parsecs", ErrBadParam},
		{"lru:entries=-3", ErrBadParam},
		{"lru:entries=many", ErrBadParam},
		{"lru:mem=63bit", ErrTooSmall},
	}
	for _, c := range cases {
		f, err := New(c.spec, 1)
		if !errors.Is(err, c.want) {
			t.Errorf("New(%q) = %v, %v; want error %v", c.spec, f, err, c.want)
			continue
		}
		if !strings.Contains(err.Error(), "filters:") {
			t.Errorf("New(%q) error %q does not say where it comes from", c.spec, err)
		}
	}
}

func TestNewUnknownFilterListsKnown(t *testing.T) {
	_, err := New("qth:mem=1KiB", 1)
	if err == nil || !strings.Contains(err.Error(), "qht") {
		t.Fatalf("error %v should list the known filters so a typo is easy to fix", err)
	}
}

// Every registered filter: String is canonical (New(String()) gives the same
// String and SizeBits), SizeBits fits in the budget asked for, and Reset
// really forgets.
func TestAllFiltersSpecRoundTrip(t *testing.T) {
	for _, spec := range testSpecs("64KiB") {
		f, err := New(spec, 7)
		if err != nil {
			t.Errorf("New(%q): %v", spec, err)
			continue
		}
		g, err := New(f.String(), 7)
		if err != nil {
			t.Errorf("New(%q.String() = %q): %v", spec, f.String(), err)
			continue
		}
		if g.String() != f.String() || g.SizeBits() != f.SizeBits() {
			t.Errorf("%q: round trip gives %q (%d bits), want %q (%d bits)", spec, g.String(), g.SizeBits(), f.String(), f.SizeBits())
		}
		if spec != "exact" && (f.SizeBits() > 64*8192 || f.SizeBits() < 64*8192/2) {
			t.Errorf("%q: SizeBits %d, want at most the 524288 asked for and not wastefully less", spec, f.SizeBits())
		}
	}
}

// Reset must make a filter indistinguishable from a new one: on the same
// keys (seen before the Reset, and fresh ones) it answers exactly as
// New(spec, seed) does, random choices included (every filter rewinds its
// generator).
func TestAllFiltersResetForgets(t *testing.T) {
	for _, spec := range testSpecs("64KiB") {
		f, err := New(spec, 3)
		if err != nil {
			t.Errorf("New(%q): %v", spec, err)
			continue
		}
		fresh, _ := New(spec, 3)
		r := mix.NewWyrand(11)
		hs := make([]uint64, 5000)
		for i := range hs {
			hs[i] = r.Uint64()
			if i < len(hs)/2 {
				f.Observe(hs[i])
			}
		}
		f.Reset()
		for i, h := range hs {
			if got, want := f.Observe(h), fresh.Observe(h); got != want {
				t.Errorf("%q: after Reset, key %d answered %v, a new filter %v", spec, i, got, want)
				break
			}
		}
	}
}

// Observe must not allocate for any filter: it runs once per packet.
func TestAllFiltersObserveAllocatesNothing(t *testing.T) {
	for _, spec := range testSpecs("64KiB") {
		f, err := New(spec, 5)
		if err != nil {
			t.Errorf("New(%q): %v", spec, err)
			continue
		}
		r := mix.NewWyrand(9)
		hs := make([]uint64, 4096)
		for i := range hs {
			hs[i] = r.Uint64()
		}
		for _, h := range hs { // fill past any lazy first-use setup
			f.Observe(h)
		}
		i := 0
		next := func() uint64 {
			// Fresh hashes for bounded filters; for exact, hashes it already
			// holds (it allocates only when it grows, and a fixed table
			// would not be exact).
			if spec == "exact" {
				i++
				return hs[i%len(hs)]
			}
			return r.Uint64()
		}
		if n := testing.AllocsPerRun(10000, func() { f.Observe(next()) }); n != 0 {
			t.Errorf("%q: Observe allocates %.2f times per call, want 0", spec, n)
		}
	}
}

// lruModel is the obvious LRU: a slice ordered from most to least recent.
type lruModel struct {
	cap  int
	keys []uint64
}

func (m *lruModel) observe(h uint64) bool {
	for i, k := range m.keys {
		if k == h {
			copy(m.keys[1:i+1], m.keys[:i])
			m.keys[0] = h
			return true
		}
	}
	if len(m.keys) < m.cap {
		m.keys = append(m.keys, 0)
	}
	copy(m.keys[1:], m.keys[:len(m.keys)-1])
	m.keys[0] = h
	return false
}

// The LRU agrees decision for decision with the model on streams with many
// repeats and evictions, including hashes that collide in the table (small
// values share high bits), which exercises backward-shift deletion.
func TestLRUMatchesModel(t *testing.T) {
	for _, entries := range []int{1, 2, 3, 8, 100} {
		l := NewLRU(entries, 0)
		m := &lruModel{cap: entries}
		r := mix.NewWyrand(uint64(entries))
		for i := range 20000 {
			var h uint64
			switch i % 3 {
			case 0:
				h = uint64(r.IntN(3 * entries)) // small values: clustered table slots
			case 1:
				h = r.Uint64() | 1<<63
			default:
				h = uint64(r.IntN(4*entries)) << 40
			}
			if got, want := l.Observe(h), m.observe(h); got != want {
				t.Fatalf("entries=%d step %d: Observe(%#x) = %v, model says %v", entries, i, h, got, want)
			}
		}
		if l.Len() != len(m.keys) {
			t.Fatalf("entries=%d: Len %d, model %d", entries, l.Len(), len(m.keys))
		}
	}
}

func TestLRUNeverFalsePositive(t *testing.T) {
	l, err := New("lru:mem=64KiB", 1)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	r := mix.NewWyrand(2)
	for range 200000 {
		h := uint64(r.IntN(1 << 14))
		if l.Observe(h) && !seen[h] {
			t.Fatalf("LRU reported unseen %d as duplicate", h)
		}
		seen[h] = true
	}
	if got := l.SizeBits(); got != 64*8192 {
		t.Errorf("SizeBits = %d, want 64 bits per entry = %d", got, 64*8192)
	}
}

// Exact is the ground truth: it must agree with a map on every element,
// including hash 0 and across table growth.
func TestExactMatchesMap(t *testing.T) {
	x := NewExact()
	seen := map[uint64]bool{}
	r := mix.NewWyrand(3)
	for i := range 300000 {
		h := uint64(r.IntN(100000))
		if i%1000 == 0 {
			h = 0
		}
		if got := x.Observe(h); got != seen[h] {
			t.Fatalf("step %d: Exact.Observe(%d) = %v, want %v", i, h, got, seen[h])
		}
		seen[h] = true
	}
	if x.Len() != len(seen) {
		t.Fatalf("Len = %d, want %d", x.Len(), len(seen))
	}
	x.Reset()
	if x.Observe(5) || x.Len() != 1 {
		t.Fatal("Reset did not empty the set")
	}
}

func TestRNGIntnUniform(t *testing.T) {
	// 60000 draws over 6 values: each count is Binomial(60000, 1/6) with
	// standard deviation sqrt(60000*1/6*5/6) ≈ 91; 6 sigma is 550.
	r := mix.NewWyrand(4)
	var c [6]int
	for range 60000 {
		c[r.IntN(6)]++
	}
	for v, n := range c {
		if n < 10000-550 || n > 10000+550 {
			t.Errorf("value %d drawn %d times, want 10000 ± 550", v, n)
		}
	}
}

func TestPackedGetSet(t *testing.T) {
	for _, width := range []uint{1, 2, 3, 5, 7, 13, 31, 63, 64} {
		a := newPacked(200, width)
		want := make([]uint64, 200)
		r := mix.NewWyrand(uint64(width))
		for range 5000 {
			i := r.IntN(200)
			v := r.Uint64() & a.mask
			a.set(i, v)
			want[i] = v
		}
		for i := range want {
			if got := a.get(i); got != want[i] {
				t.Fatalf("width %d cell %d = %#x, want %#x", width, i, got, want[i])
			}
		}
	}
}

func TestSpecVariant(t *testing.T) {
	for spec, want := range map[string]string{
		"sbf":                        "sbf",
		"sbf:mem=1MiB,blocked=1,k=3": "sbf:blocked=1",
		"BLOOM:blocked=1":            "bloom:blocked=1",
		"bloom:mem=64KiB,blocked=0":  "bloom",
		"qht:mem=64KiB,buckets=4":    "qht",
	} {
		sp, err := ParseSpec(spec)
		if err != nil {
			t.Fatalf("ParseSpec(%q): %v", spec, err)
		}
		if got := sp.Variant(); got != want {
			t.Errorf("ParseSpec(%q).Variant() = %q, want %q", spec, got, want)
		}
	}
}
