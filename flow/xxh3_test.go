package flow

import (
	"math/rand/v2"
	"testing"

	"github.com/zeebo/xxh3"
)

// refEncoding is the encoding Hash documents, written plainly.
func refEncoding(k *Key) []byte {
	enc := []byte{byte(k.kind) | k.flags<<4}
	alen := 4
	if k.flags&flagV6 != 0 {
		alen = 16
	}
	if k.kind != KeyDst {
		enc = append(enc, k.src[:alen]...)
	}
	if k.kind != KeySrc {
		enc = append(enc, k.dst[:alen]...)
	}
	if k.kind == Key5Tuple {
		enc = append(enc, k.proto, byte(k.sport>>8), byte(k.sport), byte(k.dport>>8), byte(k.dport))
	}
	return enc
}

// refSeed is the seed Hash documents for k: seed itself, or for a network
// key or one with a segment the seed moved by its prefix length and VNI.
func refSeed(k *Key, seed uint64) uint64 {
	var bits, vni uint64
	if k.flags&flagPrefix != 0 {
		bits = uint64(k.bits)
	}
	if k.flags&flagSeg != 0 {
		vni = uint64(k.seg)
	}
	return seed + (vni*256+bits)*0x9e3779b97f4a7c15
}

// checkXXH3 compares HashKey with the library's XXH3 of the encoding under
// the documented seed.
func checkXXH3(t *testing.T, k *Key, seed uint64) {
	t.Helper()
	enc := refEncoding(k)
	if got, want := HashKey(k, seed), xxh3.HashSeed(enc, refSeed(k, seed)); got != want {
		t.Fatalf("%#v, seed %#x: HashKey = %#x, xxh3.HashSeed of % x = %#x", *k, seed, got, enc, want)
	}
}

// TestXXH3: the hash computed from the fields is XXH3 of the encoding, for
// every kind (the zero one too) and family, with and without ports, under
// seeds that exercise every bit of the seed arithmetic.
func TestXXH3(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	seeds := []uint64{0, 1, 0xffffffff, 1 << 32, 1 << 63, ^uint64(0)}
	for range 200 {
		seeds = append(seeds, rng.Uint64())
	}
	for i, seed := range seeds {
		for kind := KeyKind(0); kind <= Key5Tuple; kind++ {
			for f := range uint8(16) {
				flags := f // every combination of flagV6, flagPorts, flagPrefix and flagSeg
				k := Key{kind: kind, flags: flags, proto: uint8(rng.Uint32()), sport: uint16(rng.Uint32()), dport: uint16(rng.Uint32())}
				if flags&flagPrefix != 0 {
					k.bits = uint8(rng.Uint32())
				}
				if flags&flagSeg != 0 {
					k.seg = rng.Uint32() & MaxSegment
				}
				for j := range 16 {
					k.src[j], k.dst[j] = byte(rng.Uint32()), byte(rng.Uint32())
				}
				if i%2 == 0 { // IPv4 keys as Parse makes them: the rest of the arrays zero
					clear(k.src[4:])
					clear(k.dst[4:])
				}
				checkXXH3(t, &k, seed)
			}
		}
	}
}

// FuzzHash compares the hash of arbitrary key fields with the library's
// XXH3 of their encoding.
func FuzzHash(f *testing.F) {
	f.Add(uint8(Key5Tuple), uint8(0), []byte{192, 0, 2, 1}, []byte{198, 51, 100, 2}, uint8(6), uint16(40000), uint16(443), uint8(0), uint64(0))
	f.Add(uint8(Key5Tuple), uint8(flagV6|flagPorts), []byte("\x20\x01\x0d\xb8\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01"),
		[]byte("\x20\x01\x0d\xb8\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02"), uint8(17), uint16(53), uint16(1234), uint8(0), uint64(42))
	f.Add(uint8(KeyPair), uint8(flagV6), []byte{1}, []byte{2}, uint8(0), uint16(0), uint16(0), uint8(0), ^uint64(0))
	f.Add(uint8(KeySrc), uint8(0), []byte{10, 0, 0, 1}, []byte(nil), uint8(0), uint16(0), uint16(0), uint8(0), uint64(7))
	f.Add(uint8(0), uint8(0xff), []byte(nil), []byte(nil), uint8(0), uint16(0), uint16(0), uint8(0), uint64(1)<<32)
	// Network keys: a /24 source, a /64 IPv6 5-tuple, an IPv6 /48 pair.
	f.Add(uint8(KeySrc), uint8(flagPrefix), []byte{10, 1, 2, 0}, []byte(nil), uint8(0), uint16(0), uint16(0), uint8(24), uint64(7))
	f.Add(uint8(Key5Tuple), uint8(flagV6|flagPorts|flagPrefix), []byte("\x20\x01\x0d\xb8\x00\x01\x00\x02"),
		[]byte("\x20\x01\x0d\xb8\x00\x03"), uint8(6), uint16(443), uint16(50000), uint8(64), uint64(42))
	f.Add(uint8(KeyPair), uint8(flagV6|flagPrefix), []byte("\x20\x01\x0d\xb8\x00\x01"), []byte("\x20\x01\x0d\xb8\x00\x02"), uint8(0), uint16(0), uint16(0), uint8(48), uint64(3))
	f.Fuzz(func(t *testing.T, kind, flags uint8, src, dst []byte, proto uint8, sport, dport uint16, bits uint8, seed uint64) {
		k := Key{kind: KeyKind(kind % (uint8(Key5Tuple) + 1)), flags: flags, proto: proto, sport: sport, dport: dport}
		if flags&flagPrefix != 0 {
			k.bits = bits
		}
		if flags&flagSeg != 0 {
			k.seg = uint32(seed>>40) & MaxSegment // a VNI from the seed's top bits
		}
		copy(k.src[:], src)
		copy(k.dst[:], dst)
		checkXXH3(t, &k, seed)
	})
}
