package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/report"
	"github.com/flowdedup/flowdedup/spread"
	"github.com/flowdedup/flowdedup/units"
)

// DefaultSpreadN is the list length of --spread src or dst without :N.
const DefaultSpreadN = 10

// MaxSpreadN bounds N in --spread SIDE:N: a summary line lists N hosts
// a side, up to about 100 bytes each (an IPv6 address and two 20-digit
// counts), so that two full lists (200 KB) and the largest sketch (350
// KB) stay well within the line readers take (report.MaxSummaryLine,
// 1 MiB).
const MaxSpreadN = 1000

// DefaultSpreadCounters is the least counters a side gets when
// --spread-counters is not given: 1000, or 10 N for a longer list. A
// window of at most that many hosts on a side has exact counts (every
// error 0).
const DefaultSpreadCounters = 1000

// MaxSpreadCounters bounds --spread-counters: 4,194,304 counters are
// about 390 MB a side and open window (spread.BytesPerCounter each).
const MaxSpreadCounters = 1 << 22

// spreadUsage is the help of --spread.
const spreadUsage = "list each window's top `SIDE[:N]` spreaders in its summary: src, the N sources in the most distinct keys (with --key pair: contacting the most distinct destinations; 5tuple: in the most distinct flows), or dst, the N destinations likewise (contacted by the most distinct sources); N defaults to 10; repeatable (--spread src:5 --spread dst:5); see docs/spread.md"

// spreadCountersUsage is the help of --spread-counters.
const spreadCountersUsage = "Space-Saving counters `M` per --spread side and open window (default 1000, or 10 N for a longer list; at most 4194304): counts are exact in a window of at most M hosts on the side, and overcount by at most the window's distinct keys / M otherwise; each takes about 92 bytes, however many hosts there are"

func (c *CaptureConfig) bindSpread(fs *pflag.FlagSet) {
	fs.StringArrayVar(&c.Spread, "spread", nil, spreadUsage)
	fs.IntVar(&c.SpreadCounters, "spread-counters", 0, spreadCountersUsage)
}

// checkSpread parses --spread and --spread-counters into c.spread.
func (c *CaptureConfig) checkSpread() error {
	c.spread = report.SpreadConfig{}
	if c.SpreadCounters < 0 || c.SpreadCounters > MaxSpreadCounters {
		return usagef("--spread-counters %d: give 1 to %d (0: the default)", c.SpreadCounters, MaxSpreadCounters)
	}
	for _, v := range c.Spread {
		side, ns, hasN := strings.Cut(v, ":")
		n := DefaultSpreadN
		if hasN {
			var err error
			if n, err = strconv.Atoi(ns); err != nil || n < 1 || n > MaxSpreadN {
				return usagef("--spread %q: N must be a number from 1 to %d", v, MaxSpreadN)
			}
		}
		var p *int
		switch side {
		case "src":
			if c.Key == flow.KeyDst {
				return usagef("--spread %s: --key dst keys have no source; give --key pair (distinct destinations per source) or 5tuple", v)
			}
			p = &c.spread.Src
		case "dst":
			if c.Key == flow.KeySrc {
				return usagef("--spread %s: --key src keys have no destination; give --key pair (distinct sources per destination) or 5tuple", v)
			}
			p = &c.spread.Dst
		default:
			return usagef("--spread %q: want src[:N] or dst[:N], e.g. --spread dst:10", v)
		}
		if *p != 0 {
			return usagef("--spread %s: the %s side is given twice", v, side)
		}
		*p = n
	}
	if !c.spread.On() {
		if c.SpreadCounters != 0 {
			return usagef("--spread-counters needs --spread")
		}
		return nil
	}
	longest := max(c.spread.Src, c.spread.Dst)
	m := c.SpreadCounters
	switch {
	case m == 0:
		m = min(max(DefaultSpreadCounters, 10*longest), MaxSpreadCounters)
	case m < longest:
		return usagef("--spread-counters %d: fewer counters than the %d hosts a list gives", m, longest)
	}
	c.spread.Counters = m
	c.spread.Seed = c.Seed.v ^ 0x5350524541440000 // "SPREAD": not the filters' hash
	return nil
}

// describeSpread says what --spread keeps, for the line printed at start.
func (c *CaptureConfig) describeSpread() string {
	sp := c.spread
	if !sp.On() {
		return ""
	}
	var sides []string
	if sp.Src > 0 {
		sides = append(sides, fmt.Sprintf("src top %d", sp.Src))
	}
	if sp.Dst > 0 {
		sides = append(sides, fmt.Sprintf("dst top %d", sp.Dst))
	}
	per := uint64(sp.Counters) * uint64(spread.BytesPerCounter) * uint64(len(sides))
	return fmt.Sprintf(", spread %s (%d counters a side, %s a window)", strings.Join(sides, ", "), sp.Counters, units.Approx(per))
}
