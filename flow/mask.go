package flow

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrBadMask: a prefix length is outside 0-32 (IPv4) or 0-128 (IPv6), or
// the text of a Mask is not V4LEN[,V6LEN].
var ErrBadMask = errors.New("flow: invalid prefix length")

// Mask is the network prefix lengths a run keys addresses by (the CLI's
// --prefix V4LEN[,V6LEN]): one for IPv4 addresses, one for IPv6. [Mask.Apply]
// masks a key's addresses to their networks, so that every host of a /24
// (or a /64) gives one key. The zero Mask masks nothing: keys hold hosts.
//
// Mask is a small comparable value; its text form (String, ParseMask) is
// "24,64".
type Mask struct {
	v4, v6 uint8 // prefix lengths, 0-32 and 0-128
	on     bool  // false: the zero Mask
}

// MakeMask returns the Mask of IPv4 prefix length v4 and IPv6 prefix length
// v6. A length outside 0-32 or 0-128 is an error wrapping [ErrBadMask].
func MakeMask(v4, v6 int) (Mask, error) {
	if v4 < 0 || v4 > 32 {
		return Mask{}, fmt.Errorf("%w: IPv4 prefix length %d is not in 0-32", ErrBadMask, v4)
	}
	if v6 < 0 || v6 > 128 {
		return Mask{}, fmt.Errorf("%w: IPv6 prefix length %d is not in 0-128", ErrBadMask, v6)
	}
	return Mask{v4: uint8(v4), v6: uint8(v6), on: true}, nil
}

// ParseMask returns the Mask s spells: "V4LEN,V6LEN", or "V4LEN" alone,
// which keeps IPv6 addresses whole (a V6LEN of 128), or "" for the zero Mask.
// Lengths are decimal, 0-32 and 0-128; anything else is an error wrapping
// [ErrBadMask].
func ParseMask(s string) (Mask, error) {
	if s == "" {
		return Mask{}, nil
	}
	s4, s6, two := strings.Cut(s, ",")
	v4, err := parseBits(s4)
	if err != nil {
		return Mask{}, fmt.Errorf("%w %q: want V4LEN[,V6LEN], e.g. 24,64", ErrBadMask, s)
	}
	v6 := 128
	if two {
		if v6, err = parseBits(s6); err != nil {
			return Mask{}, fmt.Errorf("%w %q: want V4LEN[,V6LEN], e.g. 24,64", ErrBadMask, s)
		}
	}
	m, err := MakeMask(v4, v6)
	if err != nil {
		return Mask{}, fmt.Errorf("%w (in %q)", err, s)
	}
	return m, nil
}

// parseBits reads a decimal prefix length: digits only, no sign, at most 3.
func parseBits(s string) (int, error) {
	if s == "" || len(s) > 3 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, ErrBadMask
	}
	return strconv.Atoi(s)
}

// IsZero reports whether m is the zero Mask, which masks nothing.
func (m Mask) IsZero() bool { return !m.on }

// Bits returns the prefix length m masks IPv6 addresses (is6) or IPv4
// addresses to, or -1 for the zero Mask.
func (m Mask) Bits(is6 bool) int {
	switch {
	case !m.on:
		return -1
	case is6:
		return int(m.v6)
	}
	return int(m.v4)
}

// String returns the text form of m, "V4LEN,V6LEN" ("24,64"), or "" for
// the zero Mask.
func (m Mask) String() string {
	b, _ := m.AppendText(nil)
	return string(b)
}

// AppendText implements [encoding.TextAppender] (see String).
func (m Mask) AppendText(b []byte) ([]byte, error) {
	if !m.on {
		return b, nil
	}
	b = strconv.AppendUint(b, uint64(m.v4), 10)
	b = append(b, ',')
	return strconv.AppendUint(b, uint64(m.v6), 10), nil
}

// MarshalText implements [encoding.TextMarshaler] (see String).
func (m Mask) MarshalText() ([]byte, error) { return m.AppendText(nil) }

// UnmarshalText implements [encoding.TextUnmarshaler] with ParseMask, so
// that a Mask can be bound to a flag with [flag.TextVar].
func (m *Mask) UnmarshalText(text []byte) error {
	p, err := ParseMask(string(text))
	if err != nil {
		return err
	}
	*m = p
	return nil
}

// Apply masks the addresses of *k to their networks of m's prefix length
// for their family, and marks k as a network key of that length: its text
// form is then CIDR ("10.1.2.0/24") and it never equals a host key. A key
// already masked to a length no longer than m's stays as it is, so applying
// a Mask twice is applying it once. The zero Mask and the zero Key are left
// alone. Apply does not allocate; with the zero Mask it costs one branch.
func (m Mask) Apply(k *Key) {
	if m.on && k.kind != 0 {
		m.apply(k)
	}
}

func (m Mask) apply(k *Key) {
	bits := m.v4
	if k.flags&flagV6 != 0 {
		bits = m.v6
	}
	if k.flags&flagPrefix != 0 && k.bits <= bits {
		return
	}
	k.flags |= flagPrefix
	k.bits = bits
	// Addresses a kind does not hold are zero and stay zero.
	if k.flags&flagV6 == 0 {
		mask := ^uint32(0) << (32 - uint(bits)) // a shift by 32 gives 0: /0
		binary.BigEndian.PutUint32(k.src[:4], binary.BigEndian.Uint32(k.src[:4])&mask)
		binary.BigEndian.PutUint32(k.dst[:4], binary.BigEndian.Uint32(k.dst[:4])&mask)
		return
	}
	hi := ^uint64(0) << (64 - uint(min(bits, 64)))  // /0 to /64: the upper half
	lo := ^uint64(0) << (128 - uint(max(bits, 64))) // /64 to /128: the lower half
	binary.BigEndian.PutUint64(k.src[:8], binary.BigEndian.Uint64(k.src[:8])&hi)
	binary.BigEndian.PutUint64(k.src[8:], binary.BigEndian.Uint64(k.src[8:])&lo)
	binary.BigEndian.PutUint64(k.dst[:8], binary.BigEndian.Uint64(k.dst[:8])&hi)
	binary.BigEndian.PutUint64(k.dst[8:], binary.BigEndian.Uint64(k.dst[8:])&lo)
}

// KeySpec says what the keys of a run hold: their kind, and the prefix
// lengths their addresses are masked to (the zero Mask: hosts). Its text
// form names both, "src" or "src/24,64": window summaries carry it, so that
// counts of hosts are never merged with counts of networks.
type KeySpec struct {
	Kind KeyKind
	Mask Mask
}

// ParseKeySpec returns the KeySpec s spells: a kind as ParseKeyKind takes
// it, then optionally "/" and a Mask as ParseMask takes it. Errors wrap
// ErrBadKind or ErrBadMask.
func ParseKeySpec(s string) (KeySpec, error) {
	ks, ms, masked := strings.Cut(s, "/")
	kind, err := ParseKeyKind(ks)
	if err != nil {
		return KeySpec{}, err
	}
	spec := KeySpec{Kind: kind}
	if masked {
		if ms == "" {
			return KeySpec{}, fmt.Errorf("%w %q: no prefix lengths after /", ErrBadMask, s)
		}
		if spec.Mask, err = ParseMask(ms); err != nil {
			return KeySpec{}, err
		}
	}
	return spec, nil
}

// String returns the text form of s: the kind, then "/" and the Mask when
// it is not zero ("src/24,64").
func (s KeySpec) String() string {
	if s.Mask.IsZero() {
		return s.Kind.String()
	}
	return s.Kind.String() + "/" + s.Mask.String()
}
