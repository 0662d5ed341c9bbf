package spread

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"slices"
	"testing"
)

// v4 returns the IPv4 address of the 32-bit number n.
func v4(n uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}

// stream is a random stream of n items over a universe of u addresses,
// half of them IPv6, drawn from a Zipf law of exponent s (heavy items and
// a long tail of rare ones, the shape of a window's fan-outs), with the
// exact count of every item, computed apart from the code under test.
func stream(r *rand.Rand, n int, u uint64, s float64) ([]netip.Addr, map[netip.Addr]uint64) {
	universe := make([]netip.Addr, u)
	for i := range universe {
		if i%2 == 0 {
			universe[i] = v4(r.Uint32())
		} else {
			var b [16]byte
			for j := range b {
				b[j] = byte(r.Uint32())
			}
			b[0] = 0x20 // a global unicast address, never a v4-mapped one
			universe[i] = netip.AddrFrom16(b)
		}
	}
	z := rand.NewZipf(r, s, 1, u-1)
	items := make([]netip.Addr, n)
	exact := make(map[netip.Addr]uint64)
	for i := range items {
		items[i] = universe[z.Uint64()]
		exact[items[i]]++
	}
	return items, exact
}

// TestGuarantee checks Space-Saving's guarantee against exact counts on
// random streams, for memories from far too small to enough for every
// item. The guarantee is deterministic (it holds for every stream, not
// with some probability), so the tolerance is zero: for a stream of n
// items and M counters,
//
//   - every counted item's D-E ≤ true ≤ D: D never undercounts, and
//     overcounts by at most E;
//   - E ≤ n/M, in integers E ≤ ⌊n/M⌋: E is the smallest count at the time
//     the item took its counter, and the M counts add up to at most n, so
//     the smallest is at most n/M;
//   - every item of true count > n/M holds a counter: an item without one
//     appeared at most the smallest count's times;
//   - the counts add up to exactly n once every counter is taken
//     (each item adds one to one counter), to n otherwise too;
//   - with M ≥ the distinct items, every D is exact and every E is 0.
func TestGuarantee(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		n, m int
		u    uint64
		s    float64
	}{
		{n: 10000, m: 10, u: 5000, s: 1.1},
		{n: 10000, m: 100, u: 5000, s: 1.1},
		{n: 50000, m: 50, u: 100000, s: 1.5},
		{n: 50000, m: 1000, u: 2000, s: 1.05},
		{n: 20000, m: 3, u: 50, s: 2},
		{n: 5000, m: 1, u: 10, s: 1.2},
		{n: 20000, m: 4000, u: 3000, s: 1.01}, // memory for every item
	} {
		items, exact := stream(r, tc.n, tc.u, tc.s)
		c, err := New(tc.m, r.Uint64())
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range items {
			c.Add(a)
		}
		if c.Total() != uint64(tc.n) {
			t.Fatalf("Total %d, want %d", c.Total(), tc.n)
		}
		top := c.Top(nil, tc.m)
		if want := min(tc.m, len(exact)); len(top) != want {
			t.Fatalf("n=%d m=%d: %d entries, want %d", tc.n, tc.m, len(top), want)
		}
		bound := uint64(tc.n / tc.m)
		var sum uint64
		listed := make(map[netip.Addr]bool)
		for _, e := range top {
			sum += e.Count
			listed[e.Item] = true
			tr := exact[e.Item]
			if e.Count < tr || e.Count-e.Error > tr {
				t.Errorf("n=%d m=%d: %v counted %d error %d, true count %d", tc.n, tc.m, e.Item, e.Count, e.Error, tr)
			}
			if e.Error > bound {
				t.Errorf("n=%d m=%d: %v error %d > n/M = %d", tc.n, tc.m, e.Item, e.Error, bound)
			}
			if len(exact) <= tc.m && (e.Error != 0 || e.Count != tr) {
				t.Errorf("n=%d m=%d with memory for all %d items: %v counted %d error %d, true %d", tc.n, tc.m, len(exact), e.Item, e.Count, e.Error, tr)
			}
		}
		if sum != uint64(tc.n) {
			t.Errorf("n=%d m=%d: the counts add up to %d, want n", tc.n, tc.m, sum)
		}
		for a, tr := range exact {
			if tr*uint64(tc.m) > uint64(tc.n) && !listed[a] { // true > n/M
				t.Errorf("n=%d m=%d: %v of true count %d > n/M has no counter", tc.n, tc.m, a, tr)
			}
		}
		checkOrder(t, top)
	}
}

// checkOrder checks that entries are by count, largest first, equal
// counts in address order.
func checkOrder(t *testing.T, top []Entry) {
	t.Helper()
	for i := 1; i < len(top); i++ {
		p, q := top[i-1], top[i]
		if p.Count < q.Count || (p.Count == q.Count && p.Item.Compare(q.Item) >= 0) {
			t.Fatalf("entries %d and %d out of order: %+v, %+v", i-1, i, p, q)
		}
	}
}

// TestTopTies: items of equal count come in address order, and of a tie at
// the k-th place the first addresses are given, whatever the order they
// came in. Hand-made stream: 10.0.0.9 five times, then 10.0.0.1 to
// 10.0.0.8 twice each, in a shuffled order.
func TestTopTies(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 7))
		var items []netip.Addr
		for range 5 {
			items = append(items, v4(0x0a000009))
		}
		for i := uint32(1); i <= 8; i++ {
			items = append(items, v4(0x0a000000+i), v4(0x0a000000+i))
		}
		r.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
		c, _ := New(16, seed)
		for _, a := range items {
			c.Add(a)
		}
		got := c.Top(nil, 4)
		want := []Entry{
			{Item: v4(0x0a000009), Count: 5},
			{Item: v4(0x0a000001), Count: 2},
			{Item: v4(0x0a000002), Count: 2},
			{Item: v4(0x0a000003), Count: 2},
		}
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d: Top(4) = %v, want %v", seed, got, want)
		}
		// Top sorted in place: the counter still counts right after it.
		c.Add(v4(0x0a000008))
		if got := c.Top(nil, 2); got[1] != (Entry{Item: v4(0x0a000008), Count: 3}) {
			t.Fatalf("seed %d: after Top and one more 10.0.0.8: %v", seed, got)
		}
	}
}

// TestReplacement follows a hand-computed run of M=2: a a b c c c.
// a:1, a:2, b:1 (free counter), c takes b's counter (count 1): c:2 err 1,
// c:3, c:4. Then Top: c 4 (error 1, true 3), a 2 (true 2).
func TestReplacement(t *testing.T) {
	a, b, cc := v4(1), v4(2), v4(3)
	c, _ := New(2, 0)
	for _, x := range []netip.Addr{a, a, b, cc, cc, cc} {
		c.Add(x)
	}
	got := c.Top(nil, 10)
	want := []Entry{{Item: cc, Count: 4, Error: 1}, {Item: a, Count: 2}}
	if !slices.Equal(got, want) {
		t.Fatalf("Top = %v, want %v", got, want)
	}
	if c.MinCount() != 2 {
		t.Fatalf("MinCount %d, want 2", c.MinCount())
	}
	c.Reset()
	if c.Len() != 0 || c.Total() != 0 || len(c.Top(nil, 10)) != 0 {
		t.Fatal("Reset left items")
	}
	c.Add(b)
	if got := c.Top(nil, 10); !slices.Equal(got, []Entry{{Item: b, Count: 1}}) {
		t.Fatalf("after Reset: %v", got)
	}
}

// TestV4Mapped: a.b.c.d and ::ffff:a.b.c.d are different items.
func TestV4Mapped(t *testing.T) {
	c, _ := New(4, 1)
	a := v4(0x01020304)
	m := netip.AddrFrom16(a.As16())
	c.Add(a)
	c.Add(m)
	c.Add(m)
	got := c.Top(nil, 4)
	if len(got) != 2 || got[0] != (Entry{Item: m, Count: 2}) || got[1] != (Entry{Item: a, Count: 1}) {
		t.Fatalf("Top = %v", got)
	}
}

func TestNewBounds(t *testing.T) {
	for _, m := range []int{0, -1, MaxCounters + 1} {
		if _, err := New(m, 0); !errors.Is(err, ErrCounters) {
			t.Errorf("New(%d): %v, want ErrCounters", m, err)
		}
	}
}

// TestCollisions: items that share their home slot (a table of 2M
// slots, M=3, and many items, so that probes and deletions wrap) are all
// counted right. Checked against exact counts with memory for all.
func TestCollisions(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		m := 1 + r.IntN(8)
		c, _ := New(m, r.Uint64())
		exact := map[netip.Addr]uint64{}
		for range 200 {
			a := v4(uint32(r.IntN(m))) // at most m items: exact counts
			c.Add(a)
			exact[a]++
		}
		for _, e := range c.Top(nil, m) {
			if e.Error != 0 || e.Count != exact[e.Item] {
				t.Fatalf("m=%d: %+v, true %d", m, e, exact[e.Item])
			}
		}
		// Now far more items than counters: replacements and
		// deletions in a full table, then the guarantee.
		c.Reset()
		exact = map[netip.Addr]uint64{}
		for range 2000 {
			a := v4(uint32(r.IntN(50)))
			c.Add(a)
			exact[a]++
		}
		for _, e := range c.Top(nil, m) {
			if tr := exact[e.Item]; e.Count < tr || e.Count-e.Error > tr || e.Error > 2000/uint64(m) {
				t.Fatalf("m=%d: %+v, true %d", m, e, tr)
			}
		}
	}
}

// TestNoAllocs: Add never allocates, counted or not, with or without a
// free counter; Top allocates nothing beyond dst.
func TestNoAllocs(t *testing.T) {
	c, _ := New(100, 5)
	var i uint32
	if n := testing.AllocsPerRun(10000, func() { c.Add(v4(i % 300)); i++ }); n != 0 {
		t.Fatalf("Add: %v allocations", n)
	}
	dst := make([]Entry, 0, 10)
	if n := testing.AllocsPerRun(100, func() { dst = c.Top(dst[:0], 10) }); n != 0 {
		t.Fatalf("Top: %v allocations", n)
	}
}

// TestMemoryBounded gives a Counter of 1000 counters 10 million distinct
// sources (a window of a /8 swept: each appears once, so every Add past
// the first 1000 replaces a counter) and checks that the heap did not
// grow: the memory is the counters', fixed by New, whatever the number of
// hosts. -short gives 1 million.
func TestMemoryBounded(t *testing.T) {
	n := uint32(10_000_000)
	if testing.Short() {
		n = 1_000_000
	}
	const m = 1000
	c, _ := New(m, 9)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		c.Add(v4(0x0a000000 + i))
	}
	runtime.ReadMemStats(&after)
	if d := after.Mallocs - before.Mallocs; d > 100 { // the runtime's own, a few at most; not one per item
		t.Errorf("%d allocations for %d items", d, n)
	}
	if d := after.TotalAlloc - before.TotalAlloc; d > 64<<10 {
		t.Errorf("%d bytes allocated for %d items", d, n)
	}
	top := c.Top(nil, 10)
	// Every source appeared once: D-E ≤ 1 ≤ D, and E ≤ n/M.
	for _, e := range top {
		if e.Count < 1 || e.Count-e.Error > 1 || e.Error > uint64(n)/m {
			t.Fatalf("%+v", e)
		}
	}
	if c.Len() != m || c.Total() != uint64(n) {
		t.Fatalf("Len %d Total %d", c.Len(), c.Total())
	}
	t.Logf("%d distinct sources, %d counters, %d bytes (%d per counter); during the adds %d allocations, %d bytes allocated, heap in use %+d bytes",
		n, m, m*BytesPerCounter, BytesPerCounter, after.Mallocs-before.Mallocs, after.TotalAlloc-before.TotalAlloc, int64(after.HeapInuse)-int64(before.HeapInuse))
}

func BenchmarkAdd(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	items, _ := stream(r, 1<<16, 1<<14, 1.1)
	c, _ := New(1000, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		c.Add(items[i&(1<<16-1)])
	}
}
