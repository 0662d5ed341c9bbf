package filters

import (
	"sort"
	"strings"
)

// Param describes one parameter of a filter family, for `flowdedup filters`
// and for error messages.
type Param struct {
	Name    string
	Default string // as the user would write it; "" when required or derived
	Help    string
}

// Family describes a filter family: its name in specs, where it comes from,
// and its parameters.
type Family struct {
	Name   string
	Paper  string
	About  string
	Params []Param
	build  func(p *params, seed uint64) (Filter, error)
}

func (f *Family) knows(key string) bool {
	for _, p := range f.Params {
		if p.Name == key {
			return true
		}
	}
	return false
}

func (f *Family) paramNames() string {
	if len(f.Params) == 0 {
		return "no parameters"
	}
	names := make([]string, len(f.Params))
	for i, p := range f.Params {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

var memParam = Param{Name: "mem", Default: "auto", Help: "state size: N bit|B|KiB|MiB|GiB, or auto (this CPU's L2 cache)"}

// blockedParam is the choice between a family's layout of its paper and the
// blocked one (Putze, Sanders & Singler, WEA 2007), whose cells of a key
// share one cache line.
var blockedParam = Param{Name: "blocked", Default: "0",
	Help: "1: all of a key's cells in one 64-byte cache line (Putze et al., WEA 2007): one cache miss per key, mem in whole 512-bit blocks"}

// families is the registry. Each family's build function lives in the file
// of its filter; the later families keep their whole Family value there.
var families = []*Family{
	{
		Name: "sbf", Paper: "Deng & Rafiei, SIGMOD 2006 (Stable Bloom Filter)",
		About: "d-bit cells; K cells set to Max per element, P neighbouring cells decremented",
		Params: []Param{memParam,
			{Name: "max", Default: "1", Help: "cell maximum Max = 2^d-1 (1, 3, ..., 255); 1 is the paper's choice when gaps are unknown"},
			{Name: "k", Default: "2", Help: "hash functions K (2: the paper's optimum for Max=1, FPS=0.1)"},
			{Name: "p", Default: "", Help: "cells decremented per element P (give p or fps, not both; p=0 is a Bloom filter)"},
			{Name: "fps", Default: "0.1", Help: "false-positive bound (Eq. 8); P from Eq. 17 rounded up so the bound holds: 0.1 gives P=5"},
			{Name: "blocked", Default: "0", Help: blockedParam.Help + "; P cells of the key's own block are decremented, Eq. 8 and 17 count a block's cells as m"},
		},
		build: buildSBF,
	},
	{
		Name: "qht", Paper: "Géraud, Lombard-Platet & Naccache (Quotient Hash Table)",
		About: "N rows of k s-bit fingerprints; an unseen element replaces a random bucket when its row is full",
		Params: []Param{memParam,
			{Name: "buckets", Default: qhtDefaultBuckets, Help: "buckets per row k, 1..64 and at most S (asymptotic FPR k/S)"},
			{Name: "fpbits", Default: qhtDefaultFPBits, Help: "fingerprint bits s, 1..32 (S = 2^s - 1 usable values; 0 marks an empty bucket)"},
		},
		build: buildQHT,
	},
	{
		Name: "qhtd", Paper: "QHT paper Sec. 5.1 (QHT with duplicates)",
		About: "QHT that also inserts duplicates (first empty bucket, else a random one)",
		Params: []Param{memParam,
			{Name: "buckets", Default: qhtDefaultBuckets, Help: "buckets per row k, 1..64 and at most S (asymptotic FPR 1-(1-1/S)^k)"},
			{Name: "fpbits", Default: qhtDefaultFPBits, Help: "fingerprint bits s, 1..32 (S = 2^s - 1 usable values)"},
		},
		build: buildQHTD,
	},
	{
		Name: "qqhtd", Paper: "QHT paper Sec. 5.2 (queued QHT with duplicates)",
		About: "QHTD whose rows are FIFO queues: every element is appended, the oldest popped",
		Params: []Param{memParam,
			{Name: "buckets", Default: qhtDefaultBuckets, Help: "buckets per row k, 1..64 and at most S: the FIFO length of a row"},
			{Name: "fpbits", Default: qhtDefaultFPBits, Help: "fingerprint bits s, 1..32 (S = 2^s - 1 usable values)"},
		},
		build: buildQQHTD,
	},
	{
		Name: "bloom", Paper: "Bloom 1970 (baseline)",
		About: "plain Bloom filter: fills up, never forgets",
		Params: []Param{memParam,
			{Name: "k", Default: "2", Help: "hash functions"},
			blockedParam,
		},
		build: buildBloom,
	},
	{
		Name: "lru", Paper: "Broder et al. buffering, as the SBF paper counts it (baseline)",
		About: "exact buffer of the most recent distinct keys with LRU eviction, 64 bits per entry",
		Params: []Param{memParam,
			{Name: "entries", Default: "", Help: "buffer entries (overrides mem; mem = 64*entries)"},
		},
		build: buildLRU,
	},
	sqfFamily, isqfFamily,
	fpsbfFamily,
	rsbfFamily, bsbfFamily, bsbfsdFamily, rlbsbfFamily,
	fpbufferFamily, cuckooFamily, a2Family, bdbfFamily,
	{
		Name: "exact", Paper: "ground truth",
		About: "exact set of every hash seen: no errors but hash collisions, unbounded memory",
		build: buildExact,
	},
}

func lookup(name string) (*Family, bool) {
	for _, f := range families {
		if f.Name == name {
			return f, true
		}
	}
	return nil, false
}

// Families lists the registered filter families, sorted by name.
func Families() []Family {
	out := make([]Family, len(families))
	for i, f := range families {
		out[i] = *f
		out[i].Params = append([]Param(nil), f.Params...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Names lists the registered filter names, sorted.
func Names() []string {
	fs := Families()
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.Name
	}
	return names
}
