// Package units is the one grammar of sizes on flowdedup's command line and
// in its filter specs: a filter's mem=, --spool-max, --xdp-prefilter,
// --xdp-ring, tune's --mem and eval's --mem list all take a number and a
// unit, and say the same thing of a bare number: it is refused, since 1024
// could be bits, bytes or kibibytes.
//
// Units: bit, and the binary multiples of a byte B, KiB, MiB, GiB, TiB. The
// letters of a unit may be in any case, but for a lone "b", which is
// refused as ambiguous between bits and bytes (B is bytes, bit is bits). The
// number may have a fraction when the size is whole ("0.5KiB" is 512
// bytes, "1.5bit" is refused).
package units

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// unit is a suffix and its size in bits.
type unit struct {
	name string
	bits float64
}

// units are tried in order: the longer suffixes first, so that "KiB" is not
// read as "B".
var units = []unit{
	{"TiB", 8 << 40}, {"GiB", 8 << 30}, {"MiB", 8 << 20}, {"KiB", 8 << 10},
	{"B", 8}, {"bit", 1},
}

// ErrSyntax is wrapped by the error of a string that is not a size.
var ErrSyntax = errors.New("not a size")

// ParseBits parses a positive size and returns it in bits. Sizes above
// 2^62 bits are refused.
func ParseBits(s string) (int64, error) {
	t := strings.TrimSpace(s)
	lt := strings.ToLower(t)
	for _, u := range units {
		num, ok := strings.CutSuffix(lt, strings.ToLower(u.name))
		if !ok {
			continue
		}
		if u.name == "B" && !strings.HasSuffix(t, "B") {
			return 0, fmt.Errorf("%w: %q: unit b is ambiguous: B for bytes, bit for bits", ErrSyntax, s)
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			break
		}
		bits := v * u.bits
		switch {
		case bits <= 0:
			return 0, fmt.Errorf("%q: a size must be positive", s)
		case bits != math.Trunc(bits):
			return 0, fmt.Errorf("%q is not a whole number of bits", s)
		case bits > 1<<62:
			return 0, fmt.Errorf("%q is too large", s)
		}
		return int64(bits), nil
	}
	if _, err := strconv.ParseFloat(t, 64); err == nil {
		return 0, fmt.Errorf("%w: %q has no unit: write 8KiB, 65536bit or 1024B (units bit, B, KiB, MiB, GiB, TiB)", ErrSyntax, s)
	}
	return 0, fmt.Errorf("%w: %q (examples: 65536bit, 8KiB, 512MiB, 20GiB)", ErrSyntax, s)
}

// ParseBytes parses a positive size that is a whole number of bytes and
// returns it in bytes.
func ParseBytes(s string) (int64, error) {
	bits, err := ParseBits(s)
	if err != nil {
		return 0, err
	}
	if bits%8 != 0 {
		return 0, fmt.Errorf("%q is not a whole number of bytes", s)
	}
	return bits / 8, nil
}

// FormatBits writes bits in the largest unit that divides it exactly, so
// that ParseBits reads it back: 65536 is "8KiB", 12 is "12bit".
func FormatBits(bits int64) string {
	if bits > 0 {
		for _, u := range units {
			if b := int64(u.bits); bits%b == 0 {
				return strconv.FormatInt(bits/b, 10) + u.name
			}
		}
	}
	return strconv.FormatInt(bits, 10) + "bit"
}

// FormatBytes writes n bytes as FormatBits does: 1536 is "1536B", 1<<30
// "1GiB".
func FormatBytes(n int64) string { return FormatBits(n * 8) }

// Approx writes n bytes in the largest binary unit that keeps the number at
// least 1, to one decimal: "1.5GiB". It is for messages, where an exact
// value would be noise; it does not always read back exactly.
func Approx(n uint64) string {
	names := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	v, i := float64(n), 0
	for v >= 1024 && i < len(names)-1 {
		v /= 1024
		i++
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", v), ".0") + names[i]
}
