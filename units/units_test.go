package units

import (
	"errors"
	"testing"
)

func TestParseBits(t *testing.T) {
	good := map[string]int64{
		"65536bit": 65536, "8KiB": 65536, "8kib": 65536, "1B": 8, "3MiB": 3 << 23,
		"0.5KiB": 4096, " 2KiB ": 16384, "1GiB": 8 << 30, "2TiB": 16 << 40, "12 bit": 12,
		"1.5GiB": 12 << 30,
	}
	for s, want := range good {
		if got, err := ParseBits(s); err != nil || got != want {
			t.Errorf("ParseBits(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	// A bare number is refused everywhere, with the reason.
	for _, s := range []string{"100", "0", "1024", "1e3"} {
		if got, err := ParseBits(s); !errors.Is(err, ErrSyntax) {
			t.Errorf("ParseBits(%q) = %d, %v; want ErrSyntax (no unit)", s, got, err)
		}
	}
	for _, s := range []string{"", "KiB", "-1KiB", "0KiB", "1.5bit", "8b", "8kb", "1 GB", "1e30TiB", "NaNbit", "InfGiB", "x", "1KiBit"} {
		if got, err := ParseBits(s); err == nil {
			t.Errorf("ParseBits(%q) = %d, want an error", s, got)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for s, want := range map[string]int64{"1B": 1, "512MiB": 512 << 20, "8bit": 1, "20GiB": 20 << 30} {
		if got, err := ParseBytes(s); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"12bit", "1", "1b"} {
		if got, err := ParseBytes(s); err == nil {
			t.Errorf("ParseBytes(%q) = %d, want an error", s, got)
		}
	}
}

func TestFormatRoundTrip(t *testing.T) {
	for _, bits := range []int64{1, 7, 8, 12, 65536, 65544, 8 << 20, 3 << 23, 1 << 40, 1 << 62} {
		s := FormatBits(bits)
		if got, err := ParseBits(s); err != nil || got != bits {
			t.Errorf("FormatBits(%d) = %q, parses back to %d, %v", bits, s, got, err)
		}
	}
	for bits, want := range map[int64]string{65536: "8KiB", 12: "12bit", 8: "1B", 3 << 32: "1536MiB"} {
		if got := FormatBits(bits); got != want {
			t.Errorf("FormatBits(%d) = %q, want the largest exact unit %q", bits, got, want)
		}
	}
	for n, want := range map[int64]string{1 << 30: "1GiB", 3 << 29: "1536MiB", 1000: "1000B", 2 << 40: "2TiB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestApprox(t *testing.T) {
	for n, want := range map[uint64]string{0: "0B", 1023: "1023B", 1536: "1.5KiB", 1 << 30: "1GiB", 3 << 39: "1.5TiB"} {
		if got := Approx(n); got != want {
			t.Errorf("Approx(%d) = %q, want %q", n, got, want)
		}
	}
}
