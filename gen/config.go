package gen

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Limits of a Config.
const (
	// MaxFlows bounds Config.Flows, and so the generator's memory (about
	// 30 bytes per flow).
	MaxFlows = 1 << 22
	// MinSnapLen is the smallest non-zero snap length: the longest header
	// stack the generator writes (Ethernet, two VLAN tags, IPv6) plus the
	// four port bytes a 5-tuple key needs, so that a snap length never
	// turns a good frame into a malformed one.
	MinSnapLen = 14 + 8 + 40 + 4
	// MaxSnapLen is the snap length written when Config.SnapLen is 0, as
	// tcpdump does; no frame the generator writes comes near it.
	MaxSnapLen = 262144
	// MaxInterfaces bounds Config.Interfaces: enough to interleave the
	// rings of any router, few enough that the interface table stays
	// small.
	MaxInterfaces = 256
)

// Formats Write can produce.
const (
	FormatPcap   = "pcap"   // libpcap format, nanosecond timestamps
	FormatPcapNG = "pcapng" // pcapng, one Ethernet interface, nanosecond timestamps
)

// DefaultStart is the time of the first packet when Config.Start is zero:
// fixed, so that outputs are reproducible, and on a minute boundary, so that
// windows line up with the capture.
var DefaultStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// ErrConfig matches, under errors.Is, every error Config.Validate returns.
var ErrConfig = errors.New("gen: invalid config")

// ConfigError is the error Config.Validate returns: a setting Write cannot
// honour exactly.
type ConfigError struct {
	Problem string // e.g. "ipv6 1.5: want a fraction in [0, 1]"
}

func (e *ConfigError) Error() string { return ErrConfig.Error() + ": " + e.Problem }

// Is reports whether target is ErrConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrConfig }

// Config describes a synthetic capture. The zero value of every field but
// Packets and Flows is a sensible default.
type Config struct {
	Packets int // frames to write, malformed ones included; at least 1
	Flows   int // distinct flows the well-formed frames carry; 1 to MaxFlows

	// Zipf is the exponent s of the flows' popularity law,
	// P(rank k) ∝ k^-s; 0 makes every flow equally popular.
	Zipf float64
	// IPv6 is the fraction of the flows that are IPv6, in [0, 1].
	IPv6 float64
	// VLAN puts every frame behind an 802.1Q tag, or an 802.1ad QinQ stack
	// for about one client in four.
	VLAN bool

	Start    time.Time     // time of the first packet; zero means DefaultStart
	Duration time.Duration // the packets' timestamps spread over [Start, Start+Duration]

	Seed   uint64
	Format string // FormatPcap (also when empty) or FormatPcapNG
	Gzip   bool   // compress the whole file with gzip

	// Malformed is the fraction of frames, in [0, 1], deliberately broken
	// (see the package documentation for the kinds).
	Malformed float64
	// Fragments is the fraction, in [0, 1], of IPv4 UDP packets written as
	// non-first fragments, whose keys have no ports.
	Fragments float64
	// SnapLen cuts frames longer than it, as a capture's snap length does,
	// keeping their original length; 0 cuts nothing and records
	// MaxSnapLen. Otherwise it is at least MinSnapLen.
	SnapLen int

	// Messy captures, for tests of time handling and damage. Each is off
	// at its zero value and, when off, leaves the output byte for byte what
	// it was without it.

	// Jitter moves each packet's timestamp back by a random amount,
	// uniform over [0, Jitter] (a random stream of its own), so that time
	// goes backwards by up to Jitter from one packet to the next, as in
	// captures merged from several rings. The packets keep their order.
	Jitter time.Duration
	// Interfaces is how many interfaces a pcapng file describes (0 or 1:
	// one); each packet goes out on one drawn uniformly (a random stream of
	// its own). pcap files have one interface.
	Interfaces int
	// InterfaceSkew is how far the last interface's clock runs behind the
	// first's: interface i stamps its packets i*InterfaceSkew/(Interfaces-1)
	// earlier, so that time goes back by up to InterfaceSkew where packets
	// of different interfaces interleave. Needs Interfaces >= 2.
	InterfaceSkew time.Duration
	// CutShort ends the file inside one more record, after its header and
	// half of its data, as a capture whose writer was killed leaves: a
	// reader gets the Packets records, then finds the file truncated. The
	// extra record repeats the last packet, so the readable part is the
	// capture written without CutShort, byte for byte, and Stats describe
	// it. With Gzip the gzip stream is whole: it holds the cut capture.
	CutShort bool

	// Spreaders, for tests of --spread. Each is off at 0 and, when off,
	// leaves the output byte for byte what it was without it.

	// Scanner adds a scanner: one source (ScannerAddr4, 203.0.113.66)
	// sending a TCP SYN to port 22 of each of Scanner distinct
	// destinations, one packet each, after the Packets frames.
	Scanner int
	// Victim adds the victim of a SYN flood: Victim distinct sources each
	// sending one TCP SYN to port 80 of one destination (VictimAddr4,
	// 203.0.113.80), after the scanner's.
	Victim int
}

// Stats describes what Write wrote. The distinct-key counts are those
// flow.Parse finds over the frames it keys, the malformed ones excluded.
type Stats struct {
	Packets   int // frames written, the scanner's and victim's included
	Flows     int // distinct flows carried, always Config.Flows
	IPv6Flows int // of which IPv6

	Malformed  int // Truncated + BadVersion + NotIP
	Truncated  int // cut inside the IP header
	BadVersion int // IP header of a version other than 4 or 6
	NotIP      int // ARP
	Fragments  int // IPv4 non-first fragments (keyed, not malformed)

	Sources      int // distinct source addresses
	Destinations int // distinct destination addresses
	Pairs        int // distinct (source, destination) pairs
	FiveTuples   int // distinct 5-tuple keys: Flows, plus one per pair with a fragment

	// Backward counts the packets stamped earlier than the packet written
	// before them (Jitter, InterfaceSkew); 0 otherwise.
	Backward int
}

// malformedCount is the number of malformed frames c asks for.
func (c *Config) malformedCount() int {
	return int(math.Round(c.Malformed * float64(c.Packets)))
}

func (c *Config) start() time.Time {
	if c.Start.IsZero() {
		return DefaultStart
	}
	return c.Start
}

// Validate reports whether Write can honour c exactly. Its errors are
// *ConfigError values.
func (c *Config) Validate() error {
	bad := func(format string, args ...any) error {
		return &ConfigError{fmt.Sprintf(format, args...)}
	}
	fraction := func(name string, v float64) error {
		if !(v >= 0 && v <= 1) { // also rejects NaN
			return bad("%s %v: want a fraction in [0, 1]", name, v)
		}
		return nil
	}
	switch {
	case c.Packets < 1:
		return bad("packets %d: want at least 1", c.Packets)
	case c.Flows < 1 || c.Flows > MaxFlows:
		return bad("flows %d: want 1 to %d", c.Flows, MaxFlows)
	case !(c.Zipf >= 0) || math.IsInf(c.Zipf, 1):
		return bad("zipf exponent %v: want 0 (uniform) or a finite s > 0", c.Zipf)
	case c.Duration < 0:
		return bad("duration %v: want at least 0", c.Duration)
	case c.Format != "" && c.Format != FormatPcap && c.Format != FormatPcapNG:
		return bad("format %q: want %s or %s", c.Format, FormatPcap, FormatPcapNG)
	case c.SnapLen != 0 && (c.SnapLen < MinSnapLen || c.SnapLen > MaxSnapLen):
		return bad("snap length %d: want 0 (no limit) or %d to %d; a shorter one would cut frames inside the headers a key needs",
			c.SnapLen, MinSnapLen, MaxSnapLen)
	case c.Jitter < 0:
		return bad("jitter %v: want at least 0", c.Jitter)
	case c.Interfaces < 0 || c.Interfaces > MaxInterfaces:
		return bad("interfaces %d: want 1 to %d", c.Interfaces, MaxInterfaces)
	case c.Interfaces > 1 && c.Format != FormatPcapNG:
		return bad("interfaces %d: a pcap file has one interface; write pcapng", c.Interfaces)
	case c.InterfaceSkew < 0:
		return bad("interface skew %v: want at least 0", c.InterfaceSkew)
	case c.InterfaceSkew > 0 && c.Interfaces < 2:
		return bad("interface skew %v needs at least 2 interfaces", c.InterfaceSkew)
	case c.Scanner < 0 || c.Scanner > MaxAttackHosts:
		return bad("scanner %d: want 0 to %d destinations", c.Scanner, MaxAttackHosts)
	case c.Victim < 0 || c.Victim > MaxAttackHosts:
		return bad("victim %d: want 0 to %d sources", c.Victim, MaxAttackHosts)
	}
	for _, err := range []error{fraction("ipv6", c.IPv6), fraction("malformed", c.Malformed), fraction("fragments", c.Fragments)} {
		if err != nil {
			return err
		}
	}
	if keyed := c.Packets - c.malformedCount(); c.Flows > keyed {
		return bad("flows %d exceed the %d well-formed packets (%d packets, %d malformed): every flow needs one",
			c.Flows, keyed, c.Packets, c.Packets-keyed)
	}
	start := c.start()
	if start.Before(time.Unix(0, 0)) {
		return bad("start %v: captures cannot hold times before 1970", start)
	}
	// Jitter and skew only move times back.
	if back := c.Jitter + c.InterfaceSkew; back < 0 || start.Add(-back).Before(time.Unix(0, 0)) {
		return bad("start %v less jitter %v and interface skew %v: captures cannot hold times before 1970", start, c.Jitter, c.InterfaceSkew)
	}
	// pcap holds unsigned 32-bit seconds, pcapng 64-bit nanoseconds.
	last := start.Add(c.Duration)
	if c.Format != FormatPcapNG && last.Unix() > math.MaxUint32 {
		return bad("timestamps up to %v do not fit pcap's 32-bit seconds; use pcapng", last)
	}
	if last.UnixNano() < start.UnixNano() { // UnixNano overflows past 2262
		return bad("timestamps up to %v do not fit 64-bit nanoseconds", last)
	}
	return nil
}
