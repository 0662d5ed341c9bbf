package filters

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/flowdedup/flowdedup/units"
	"github.com/klauspost/cpuid/v2"
)

// Spec is a parsed filter spec: name[:key=value[,key=value...]].
type Spec struct {
	Name   string
	Params map[string]string
}

// Variant is the spec's family name, followed by ":blocked=1" when it asks
// for the blocked layout: what tells filters of one family apart by
// structure rather than by setting. Reports draw a line, or keep a group,
// per variant.
func (s Spec) Variant() string {
	if s.Params["blocked"] == "1" {
		return s.Name + ":blocked=1"
	}
	return s.Name
}

// ParseSpec parses the spec grammar without checking names or parameters
// against the registry; New does that.
func ParseSpec(s string) (Spec, error) {
	name, rest, hasParams := strings.Cut(strings.TrimSpace(s), ":")
	name = strings.ToLower(strings.TrimSpace(name))
	if name == "" {
		return Spec{}, fmt.Errorf("filters: %q: %w: empty filter name", s, ErrSyntax)
	}
	sp := Spec{Name: name, Params: map[string]string{}}
	if !hasParams {
		return sp, nil
	}
	if strings.TrimSpace(rest) == "" {
		return Spec{}, fmt.Errorf("filters: %q: %w: ':' with no parameters after it", s, ErrSyntax)
	}
	for kv := range strings.SplitSeq(rest, ",") {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.ToLower(strings.TrimSpace(k))
		v = strings.TrimSpace(v)
		if !ok || k == "" || v == "" {
			return Spec{}, fmt.Errorf("filters: %q: %w: parameter %q is not key=value", s, ErrSyntax, kv)
		}
		if _, dup := sp.Params[k]; dup {
			return Spec{}, fmt.Errorf("filters: %q: %w: parameter %q given twice", s, ErrSyntax, k)
		}
		sp.Params[k] = v
	}
	return sp, nil
}

// New builds the filter that spec names. seed drives the filter's own
// randomness (eviction and decrement choices); the hashes it observes are
// keyed separately by the caller.
func New(spec string, seed uint64) (Filter, error) {
	sp, err := ParseSpec(spec)
	if err != nil {
		return nil, err
	}
	fam, ok := lookup(sp.Name)
	if !ok {
		return nil, fmt.Errorf("filters: %q: %w %q (known: %s)", spec, ErrUnknownFilter, sp.Name, strings.Join(Names(), ", "))
	}
	p := &params{spec: spec, vals: sp.Params, used: map[string]bool{}}
	for k := range sp.Params {
		if !fam.knows(k) {
			return nil, fmt.Errorf("filters: %q: %w %q for %s (it takes: %s)", spec, ErrUnknownParam, k, fam.Name, fam.paramNames())
		}
	}
	f, err := fam.build(p, seed)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// params gives a family's constructor typed access to its spec's values,
// with errors that name the spec and the parameter.
type params struct {
	spec string
	vals map[string]string
	used map[string]bool
}

func (p *params) has(key string) bool {
	_, ok := p.vals[key]
	return ok
}

func (p *params) errorf(key string, format string, args ...any) error {
	return fmt.Errorf("filters: %q: %w: %s=%s: %s", p.spec, ErrBadParam, key, p.vals[key], fmt.Sprintf(format, args...))
}

// tooSmall reports that mem cannot hold one row (or one cell) of the filter.
func (p *params) tooSmall(memBits, needBits int, what string) error {
	return fmt.Errorf("filters: %q: %w: %d bits cannot hold %s (%d bits)", p.spec, ErrTooSmall, memBits, what, needBits)
}

// int returns key's integer value in [lo, hi], or def when absent.
func (p *params) int(key string, def, lo, hi int) (int, error) {
	s, ok := p.vals[key]
	if !ok {
		return def, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, p.errorf(key, "not an integer")
	}
	if v < lo || v > hi {
		return 0, p.errorf(key, "out of range [%d, %d]", lo, hi)
	}
	return v, nil
}

// float returns key's value in [lo, hi], or def when absent.
func (p *params) float(key string, def, lo, hi float64) (float64, error) {
	s, ok := p.vals[key]
	if !ok {
		return def, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) {
		return 0, p.errorf(key, "not a number")
	}
	if v < lo || v > hi {
		return 0, p.errorf(key, "out of range [%g, %g]", lo, hi)
	}
	return v, nil
}

// mem returns the memory budget in bits: the "mem" parameter, or the L2
// cache size (mem=auto) when absent.
func (p *params) mem() (int, error) {
	s, ok := p.vals["mem"]
	if !ok {
		s = "auto"
	}
	bits, err := ParseMem(s)
	if err != nil {
		return 0, fmt.Errorf("filters: %q: %w: mem=%s: %v", p.spec, ErrBadParam, s, err)
	}
	return bits, nil
}

// maxMemBits bounds mem= so that arithmetic on bit counts cannot overflow
// and a typo cannot ask for more than any machine has: 2^40 bits = 128 GiB
// where int has 64 bits; 2^30 bits = 128 MiB on 32-bit platforms (routers
// on arm or mipsle), where bit counts are 32-bit ints and one bit of
// headroom is kept for products such as need*d.
const maxMemBits = min(1<<40, math.MaxInt>>1+1)

// ParseMem parses a memory size in the grammar of package units (a number
// and a unit: bit, B, KiB, MiB, GiB; "65536bit" == "8KiB"; a bare number is
// refused), or "auto" for the L2 cache size of this machine's first CPU.
// It returns bits, at most the platform's limit (maxMemBits).
func ParseMem(s string) (int, error) {
	if strings.EqualFold(strings.TrimSpace(s), "auto") {
		return L2CacheBits(), nil
	}
	bits, err := units.ParseBits(s)
	if err != nil {
		return 0, err
	}
	if bits > maxMemBits {
		return 0, fmt.Errorf("%q is larger than the %s limit", s, FormatMem(maxMemBits))
	}
	return int(bits), nil
}

// FormatMem writes bits in the largest unit that divides it exactly
// (units.FormatBits), so that ParseMem reads it back.
func FormatMem(bits int) string { return units.FormatBits(int64(bits)) }

// defaultL2Bits is used when sysfs does not say (containers, non-Linux).
const defaultL2Bits = 8 << 20 // 1 MiB

// L2CacheBits is the size in bits of the L2 cache of CPU 0, read from sysfs,
// else from CPUID (virtual machines often hide the sysfs cache tree), else
// 1 MiB. It is what mem=auto means: one shard's filter sized to stay in its
// core's L2.
func L2CacheBits() int {
	if n := sysfsL2Bytes(); n > 0 {
		return n * 8
	}
	if n := cpuid.CPU.Cache.L2; n > 0 {
		return n * 8
	}
	return defaultL2Bits
}

func sysfsL2Bytes() int {
	for i := 0; i < 8; i++ {
		dir := fmt.Sprintf("/sys/devices/system/cpu/cpu0/cache/index%d/", i)
		lvl, err := os.ReadFile(dir + "level")
		if err != nil {
			break
		}
		if strings.TrimSpace(string(lvl)) != "2" {
			continue
		}
		size, err := os.ReadFile(dir + "size")
		if err != nil {
			break
		}
		if n, ok := parseSysfsSize(strings.TrimSpace(string(size))); ok {
			return n
		}
	}
	return 0
}

// parseSysfsSize reads sysfs cache sizes such as "1024K" or "2M" into bytes.
func parseSysfsSize(s string) (int, bool) {
	mult := 1
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, s[:len(s)-1]
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, s[:len(s)-1]
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, false
	}
	return n * mult, true
}

// fingerprintSlots checks the buckets (b) and fpbits (f) of a table of
// non-zero fingerprints (QHT family, cuckoo): a row or bucket of distinct
// fingerprints cannot use more than the 2^f - 1 usable values (QHT's Setup,
// 0 < k <= S). The error names the parameter the user gave.
func (p *params) fingerprintSlots(b, f int) error {
	if maxB := int(min(int64(1)<<f-1, math.MaxInt)); b > maxB { // f <= 32: int64 on 32-bit platforms
		key := "buckets"
		if !p.has(key) {
			key = "fpbits"
		}
		return p.errorf(key, "buckets=%d exceed the %d usable fingerprints of fpbits=%d (need buckets <= 2^fpbits-1)", b, maxB, f)
	}
	return nil
}
