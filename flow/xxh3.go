package flow

import (
	"encoding/binary"
	"math/bits"
)

// The key hash is XXH3-64 with a seed (Yann Collet, xxHash, "XXH3
// algorithm", the xxHash specification), over the encoding Hash documents.
// github.com/zeebo/xxh3 computes it from a byte slice; hashing a key that
// way means writing its encoding to memory and reading it back at once in
// 8-byte words, which the CPU cannot serve from the narrower stores that
// wrote it: it waits for them to reach the cache, and the hash of a key took
// 11 ns where the library hashes a resident buffer of the same length in
// 2.5. The functions here compute the same XXH3 from the key's fields held
// in registers: encodings of 5 to 38 bytes take XXH3's paths for 4-8, 9-16
// and 17-128 bytes. The library stays the reference: TestHashEncoding,
// TestXXH3 and FuzzHash compare every kind and family with it.

// XXH3 constants: the primes, and the words of its default secret that the
// short paths read (the little-endian uint64 at the byte offset each name
// gives).
const (
	xxhPrime64_1 = 0x9e3779b185ebca87
	xxhSecret000 = 0xbe4ba423396cfeb8
	xxhSecret008 = 0x1cad21f72c81017c
	xxhSecret016 = 0xdb979083e96dd4de
	xxhSecret024 = 0x1f67b3b7a4a44072
	xxhSecret032 = 0x78e5c0cc4ee679cb
	xxhSecret040 = 0x2172ffcc7dd05a82
	xxhSecret048 = 0x8e2443f7744608b8
	xxhSecret056 = 0x4c263a81e69035e0
)

// hashFields returns Hash of k under seed: XXH3-64 of its encoding, whose
// bytes it assembles in words without writing them to memory.
func hashFields(k *Key, seed uint64) uint64 {
	head := uint64(byte(k.kind) | k.flags<<4)
	if k.flags&(flagPrefix|flagSeg) != 0 {
		// A network key, or one with a segment: its prefix length and
		// segment move the seed (see Hash). Both are zero without their
		// flag.
		seed += (uint64(k.seg)<<8 | uint64(k.bits)) * prefixSeedStep
	}
	if k.flags&flagV6 == 0 {
		// IPv4: at most 14 bytes, in two words lo (bytes 0-7) and hi.
		var lo, hi uint64
		n := uint(1)
		lo = head
		if k.kind != KeyDst {
			lo |= uint64(binary.LittleEndian.Uint32(k.src[:4])) << 8
			n += 4
		}
		if k.kind != KeySrc {
			a := uint64(binary.LittleEndian.Uint32(k.dst[:4]))
			lo |= a << (8 * n)
			if n == 5 {
				hi = a >> 24 // the dst bytes past byte 7
			}
			n += 4
		}
		if k.kind == Key5Tuple {
			// Bytes 9-13: the protocol, then the ports in network order.
			hi |= uint64(k.proto)<<8 | uint64(bits.ReverseBytes16(k.sport))<<16 | uint64(bits.ReverseBytes16(k.dport))<<32
			n += 5
		}
		if n <= 8 {
			return xxh3Len4to8(uint32(lo), uint32(lo>>(8*(n-4))), n, seed)
		}
		// The last 8 bytes, n-8 to n-1.
		s := 8 * (n - 8)
		return xxh3Len9to16(lo, lo>>s|hi<<(64-s), n, seed)
	}
	prime1 := uint64(xxhPrime64_1) // products wrap around, as XXH3's do
	// IPv6: 17, 33 or 38 bytes: the kind byte, one or two addresses
	// (a0 a1, then b0 b1, as little-endian words), the 5-tuple's 5 bytes.
	first := &k.src
	if k.kind == KeyDst {
		first = &k.dst
	}
	a0, a1 := binary.LittleEndian.Uint64(first[:8]), binary.LittleEndian.Uint64(first[8:])
	// The words of bytes 0-7 and 8-15.
	w0, w1 := head|a0<<8, a0>>56|a1<<8
	if k.kind == KeySrc || k.kind == KeyDst {
		// 17 bytes: bytes 1-8 and 9-16 are a0 and a1.
		acc := uint64(17)*prime1 + mulFold64(w0^(xxhSecret000+seed), w1^(xxhSecret008-seed))
		acc += mulFold64(a0^(xxhSecret016+seed), a1^(xxhSecret024-seed))
		return xxh3Avalanche(acc)
	}
	b0, b1 := binary.LittleEndian.Uint64(k.dst[:8]), binary.LittleEndian.Uint64(k.dst[8:])
	// The words of bytes 16-23 and 24-31.
	w2, w3 := a1>>56|b0<<8, b0>>56|b1<<8
	if k.kind != Key5Tuple { // a pair, or the zero kind
		// 33 bytes: bytes 1-8, 9-16, 17-24 and 25-32 are a0, a1, b0, b1.
		acc := uint64(33)*prime1 + mulFold64(w2^(xxhSecret032+seed), w3^(xxhSecret040-seed))
		acc += mulFold64(a0^(xxhSecret048+seed), a1^(xxhSecret056-seed))
		acc += mulFold64(w0^(xxhSecret000+seed), w1^(xxhSecret008-seed))
		acc += mulFold64(b0^(xxhSecret016+seed), b1^(xxhSecret024-seed))
		return xxh3Avalanche(acc)
	}
	// 38 bytes: bytes 32-37 are b1's last byte, the protocol and the
	// ports in network order. The 8 bytes at offsets 6, 14, 22 and 30.
	w4 := b1>>56 | uint64(k.proto)<<8 | uint64(bits.ReverseBytes16(k.sport))<<16 | uint64(bits.ReverseBytes16(k.dport))<<32
	acc := uint64(38)*prime1 + mulFold64(w2^(xxhSecret032+seed), w3^(xxhSecret040-seed))
	acc += mulFold64((w0>>48|w1<<16)^(xxhSecret048+seed), (w1>>48|w2<<16)^(xxhSecret056-seed))
	acc += mulFold64(w0^(xxhSecret000+seed), w1^(xxhSecret008-seed))
	acc += mulFold64((w2>>48|w3<<16)^(xxhSecret016+seed), (w3>>48|w4<<16)^(xxhSecret024-seed))
	return xxh3Avalanche(acc)
}

// xxh3Len4to8 is XXH3-64 of n bytes, 4 <= n <= 8, whose first and last 4
// bytes, little-endian, are first and last.
func xxh3Len4to8(first, last uint32, n uint, seed uint64) uint64 {
	seed ^= uint64(bits.ReverseBytes32(uint32(seed))) << 32
	x := (uint64(last) | uint64(first)<<32) ^ (xxhSecret008 ^ xxhSecret016 - seed)
	// rrmxmx
	x ^= bits.RotateLeft64(x, 49) ^ bits.RotateLeft64(x, 24)
	x *= 0x9fb21c651e98df25
	x ^= x>>35 + uint64(n)
	x *= 0x9fb21c651e98df25
	return x ^ x>>28
}

// xxh3Len9to16 is XXH3-64 of n bytes, 9 <= n <= 16, whose first and last 8
// bytes, little-endian, are first and last.
func xxh3Len9to16(first, last uint64, n uint, seed uint64) uint64 {
	lo := first ^ (xxhSecret024 ^ xxhSecret032 + seed)
	hi := last ^ (xxhSecret040 ^ xxhSecret048 - seed)
	return xxh3Avalanche(uint64(n) + bits.ReverseBytes64(lo) + hi + mulFold64(lo, hi))
}

func mulFold64(x, y uint64) uint64 {
	hi, lo := bits.Mul64(x, y)
	return hi ^ lo
}

func xxh3Avalanche(x uint64) uint64 {
	x ^= x >> 37
	x *= 0x165667919e3779f9
	return x ^ x>>32
}
