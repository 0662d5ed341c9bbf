package soak

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// Config describes a soak stream: Windows windows of traffic, each with
// about Keys distinct source addresses, and the late packets of every
// boundary. The zero value of a field is not a default: Validate says what
// is missing.
type Config struct {
	Start    time.Time     // start of the first window: a multiple of Window since the Unix epoch
	Window   time.Duration // window length, as flowdedup's --window; at least 2s
	Lateness time.Duration // allowed lateness, as flowdedup's --lateness; positive, below Window/2
	Windows  int           // windows of traffic (a closing prefix of one more follows them)
	// Keys is the most distinct keys of a window: window h has
	// Keys - h%10 of them, so that a count put in the wrong window shows.
	// At least MinKeys, at most MaxKeys.
	Keys int
	// Stragglers is how many first sightings of a window's keys come
	// after the next window has begun, within the lateness (at least 1,
	// at most Keys/4).
	Stragglers int
}

const (
	// MinKeys is the fewest keys a window may have: the boundary uses
	// three keys of the new window, and stragglers take a quarter.
	MinKeys = 32
	// MaxKeys is the most: a window's keys are 10.0.0.0/8 addresses.
	MaxKeys = 1 << 22

	addrBits    = 24 // window keys are 10.0.0.0/8
	addrMask    = 1<<addrBits - 1
	windowBase  = 10 << 24         // 10.0.0.0
	lateBase    = 172<<24 | 16<<16 // 172.16.0.0/12: never a window key
	lateMask    = 1<<20 - 1
	permMul     = 0x9e3779 | 1 // odd: a bijection of the 24-bit indexes
	recordLen   = 16 + frameLen
	frameLen    = 28 // IPv4 + UDP headers, no payload
	linkTypeIP4 = 228
)

// ErrConfig is wrapped by Validate's errors.
var ErrConfig = errors.New("soak: bad stream config")

// Validate reports whether c describes a stream Write can make.
func (c *Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Window < 2*time.Second:
		return bad("window %v: want at least 2s (stragglers go back up to 1s)", c.Window)
	case c.Lateness <= 0 || 2*c.Lateness >= c.Window:
		return bad("lateness %v: want more than 0 and less than half the window %v", c.Lateness, c.Window)
	case c.Start.UnixNano()%int64(c.Window) != 0:
		return bad("start %v is not a multiple of the window %v since the epoch", c.Start, c.Window)
	case c.Windows < 1:
		return bad("windows %d: want at least 1", c.Windows)
	case c.Keys < MinKeys || c.Keys > MaxKeys:
		return bad("keys %d: want %d to %d", c.Keys, MinKeys, MaxKeys)
	case c.Stragglers < 1 || c.Stragglers > (c.Keys-9)/4:
		return bad("stragglers %d: want 1 to a quarter of the smallest window's keys, %d", c.Stragglers, (c.Keys-9)/4)
	}
	// The ancient late packet is written at the start of 1999: the
	// stream must start after it, and its times fit pcap's 32-bit seconds.
	if !c.Start.After(ancient.Add(c.Window)) || c.end().Unix() >= 1<<32 {
		return bad("start %v: want the window after 1999 and before 2106", c.Start)
	}
	return nil
}

// keys returns the number of distinct keys of window h.
func (c *Config) keys(h int) int { return c.Keys - h%10 }

// end returns the end of the closing window.
func (c *Config) end() time.Time {
	return c.Start.Add(time.Duration(c.Windows+1) * c.Window)
}

// ancient is the time of the oldest late packet of every boundary: a
// capture file from another century given along with today's.
var ancient = time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC)

// Window is what flowdedup must report for one window, as the summary of
// its --summary file says it: the generator counts it while it writes, by
// the rule of flowdedup's documentation (a window closes when the newest
// time seen passes its end plus the lateness; a packet older than every
// open window is late, counted in the window of the newest time).
type Window struct {
	Start    time.Time
	Packets  uint64 // the window's own packets and the late ones it received
	Keys     uint64 // packets keyed in the window (all but the late ones)
	Distinct uint64 // distinct keys among them
	Late     uint64
}

// Truth is what Write wrote, window by window: Windows windows and the
// closing one, which holds three keys and the last boundary's late packets.
type Truth struct {
	Windows []Window
	Packets uint64 // packets written
}

// Key returns the address of the j-th key of window h (j < c.keys(h)).
// Windows h and h+1 share half their keys (the second half of h is the
// first half of h+1), so a filter not cleared at a boundary would miss
// them.
func (c *Config) Key(h, j int) uint32 {
	i := uint32(uint64(h)*uint64(c.Keys/2)+uint64(j)) & addrMask
	return windowBase | (i*permMul)&addrMask
}

// Index inverts Key: it returns j such that Key(h, j) == addr, or false
// when addr is not a key of window h.
func (c *Config) Index(h int, addr uint32) (int, bool) {
	if addr&^addrMask != windowBase {
		return 0, false
	}
	i := (addr & addrMask) * permInv & addrMask
	j := int((i - uint32(uint64(h)*uint64(c.Keys/2))) & addrMask)
	return j, j < c.keys(h)
}

// permInv is the inverse of permMul modulo 2^24 (Newton's iteration: each
// step doubles the correct low bits).
var permInv = func() uint32 {
	x := uint32(permMul)
	for range 5 {
		x *= 2 - permMul*x
	}
	return x & addrMask
}()

// Write writes the stream to w as a pcap file (nanosecond timestamps, raw
// IPv4 link type, IPv4/UDP frames keyed by their source address) and
// returns what flowdedup must report of it.
//
// The stream, window by window (window h starts at H; H' = H + Window):
//
//   - the window's keys in order, about one in four seen a second time
//     later in the window; times rise through the window, but one packet
//     in 97 goes back 2s and one in 1000 goes back 10 minutes (neither is
//     late: its window is still the newest);
//   - at each boundary, before the next window's other packets: its first
//     key at H'; the last Stragglers keys of window h, seen for the first
//     time, at times in [H'-1s, H'); a key of the next window at
//     H'+Lateness-1ns and one more straggler at H'-1ns (the latest a
//     packet of h is still on time); a key at H'+Lateness, which closes
//     window h; then five late packets from 172.16.0.0/12 at H'-1ns,
//     H'-Lateness, H, H-Window-1s and 1999-01-01 (counted as late in
//     window h+1, never keyed).
//
// After the last window a closing boundary ends the stream: its late
// packets are counted in a last window with three keys.
//
// at, when not nil, is called after every boundary whose number (the
// windows closed so far) is a multiple of every, with the output flushed:
// the stream pauses there until it returns, so a test can read the state
// of the process reading it at the same point of every day. An error from
// at or from w stops Write.
func (c *Config) Write(w io.Writer, every int, at func(closed int) error) (*Truth, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	g := &writer{
		cfg:   c,
		out:   bufio.NewWriterSize(w, 1<<20),
		d:     int64(c.Window),
		l:     int64(c.Lateness),
		start: c.Start.UnixNano(),
		truth: &Truth{Windows: make([]Window, c.Windows+1)},
		open:  map[int64]bitset{},
	}
	for i := range g.truth.Windows {
		g.truth.Windows[i].Start = c.Start.Add(time.Duration(i) * c.Window)
	}
	var hdr [24]byte
	binary.LittleEndian.PutUint32(hdr[0:], 0xa1b23c4d) // nanosecond pcap
	binary.LittleEndian.PutUint16(hdr[4:], 2)
	binary.LittleEndian.PutUint16(hdr[6:], 4)
	binary.LittleEndian.PutUint32(hdr[16:], 65535)
	binary.LittleEndian.PutUint32(hdr[20:], linkTypeIP4)
	g.out.Write(hdr[:])

	for h := range c.Windows {
		if h > 0 {
			g.boundary(h - 1)
			if err := g.pause(h, every, at); err != nil {
				return g.truth, err
			}
		}
		g.regular(h)
	}
	g.boundary(c.Windows - 1)
	if err := g.pause(c.Windows, every, at); err != nil {
		return g.truth, err
	}
	if err := g.out.Flush(); err != nil {
		return g.truth, fmt.Errorf("soak: write: %w", err)
	}
	return g.truth, g.err
}

// writer is the state of one Write.
type writer struct {
	cfg      *Config
	out      *bufio.Writer
	d, l     int64 // window and lateness, ns
	start    int64 // Unix ns of window 0
	newest   int64 // newest time written (ns)
	lo       int64 // oldest open window: index(newest - l)
	hasFirst bool
	truth    *Truth
	open     map[int64]bitset // keys seen in each open window
	lateSeq  uint32
	rec      [recordLen]byte
	err      error // the first error of the model: a bug of the generator
}

// regular writes the keys of window h that are not stragglers, with
// repeats and times going back within the window.
func (g *writer) regular(h int) {
	c := g.cfg
	n := c.keys(h)
	h0 := g.start + int64(h)*g.d
	first := 3 // the boundary wrote keys 0, 1 and 2
	if h == 0 {
		first = 0
	}
	for j := first; j < n-c.Stragglers; j++ {
		t := h0 + int64(uint64(g.d)*uint64(j+1)/uint64(n+1))
		switch {
		case j%1000 == 500:
			t = max(h0, t-int64(10*time.Minute))
		case j%97 == 50:
			t = max(h0, t-int64(2*time.Second))
		}
		g.packet(t, c.Key(h, j))
		if j%4 == 3 {
			g.packet(t, c.Key(h, j/2))
		}
	}
}

// boundary writes the boundary between window h and h+1 (see Write).
func (g *writer) boundary(h int) {
	c := g.cfg
	n := c.keys(h)
	next := g.start + int64(h+1)*g.d
	g.packet(next, c.Key(h+1, 0))
	s := c.Stragglers
	for k := range s - 1 {
		g.packet(next-int64(time.Second)+int64(k)*int64(time.Second)/int64(s), c.Key(h, n-s+k))
	}
	g.packet(next+g.l-1, c.Key(h+1, 1))
	g.packet(next-1, c.Key(h, n-1))
	g.packet(next+g.l, c.Key(h+1, 2))
	for _, t := range []int64{next - 1, next - g.l, next - g.d, next - 2*g.d - int64(time.Second), ancient.UnixNano()} {
		g.packet(t, lateBase|g.lateSeq&lateMask)
		g.lateSeq++
	}
}

// pause flushes the output and calls at when closed is a multiple of
// every.
func (g *writer) pause(closed, every int, at func(int) error) error {
	if at == nil || every <= 0 || closed%every != 0 {
		return nil
	}
	if err := g.out.Flush(); err != nil {
		return fmt.Errorf("soak: write: %w", err)
	}
	return at(closed)
}

// index returns the window of time t, relative to window 0.
func (g *writer) index(t int64) int64 {
	i := (t - g.start) / g.d
	if t < g.start && (t-g.start)%g.d != 0 {
		i--
	}
	return i
}

// packet writes one packet from src at time t and counts it where
// flowdedup's documented rule says it belongs.
func (g *writer) packet(t int64, src uint32) {
	g.writeRecord(t, src)
	g.truth.Packets++
	if !g.hasFirst || t > g.newest {
		g.newest, g.hasFirst = t, true
		if lo := g.index(t - g.l); lo != g.lo {
			g.lo = lo
			for w := range g.open {
				if w < lo {
					delete(g.open, w) // closed: its keys are forgotten
				}
			}
		}
	}
	hi := g.index(g.newest)
	w := g.index(t)
	if w < g.lo {
		g.count(hi).Packets++
		g.count(hi).Late++
		return
	}
	win := g.count(w)
	if win == nil {
		return
	}
	win.Packets++
	win.Keys++
	j, ok := g.cfg.Index(int(w), src)
	if !ok {
		g.fail("packet from %v counted in window %d, whose keys it is not", addrString(src), w)
		return
	}
	seen := g.open[w]
	if seen == nil {
		seen = newBitset(g.cfg.Keys)
		g.open[w] = seen
	}
	if !seen.testAndSet(j) {
		win.Distinct++
	}
}

// count returns the truth of window w, or nil (and a model error) when w
// is not one of the stream's.
func (g *writer) count(w int64) *Window {
	if w < 0 || w >= int64(len(g.truth.Windows)) {
		g.fail("a packet counted in window %d, outside the stream", w)
		return nil
	}
	return &g.truth.Windows[w]
}

func (g *writer) fail(format string, args ...any) {
	if g.err == nil {
		g.err = fmt.Errorf("soak: generator model: "+format, args...)
	}
}

// writeRecord appends one pcap record: an IPv4/UDP header from src to
// 192.0.2.1, port 1024 to 53.
func (g *writer) writeRecord(t int64, src uint32) {
	r := &g.rec
	binary.LittleEndian.PutUint32(r[0:], uint32(t/1e9))
	binary.LittleEndian.PutUint32(r[4:], uint32(t%1e9))
	binary.LittleEndian.PutUint32(r[8:], frameLen)
	binary.LittleEndian.PutUint32(r[12:], frameLen)
	ip := r[16:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], frameLen)
	ip[8] = 64 // TTL
	ip[9] = 17 // UDP
	binary.BigEndian.PutUint32(ip[12:], src)
	binary.BigEndian.PutUint32(ip[16:], 0xc0000201) // 192.0.2.1
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:], ipChecksum(ip[:20]))
	binary.BigEndian.PutUint16(ip[20:], 1024)
	binary.BigEndian.PutUint16(ip[22:], 53)
	binary.BigEndian.PutUint16(ip[24:], 8)
	g.out.Write(r[:])
}

// ipChecksum is the Internet checksum of an IPv4 header whose checksum
// field is zero.
func ipChecksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i < len(h); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

func addrString(a uint32) string {
	return fmt.Sprintf("%d.%d.%d.%d", a>>24, a>>16&0xff, a>>8&0xff, a&0xff)
}

// bitset is a set of key indexes of one window.
type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

// testAndSet adds i and reports whether it was there already.
func (b bitset) testAndSet(i int) bool {
	w, m := i/64, uint64(1)<<(i%64)
	was := b[w]&m != 0
	b[w] |= m
	return was
}
