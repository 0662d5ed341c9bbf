//go:build linux && !(mips || mips64 || ppc64 || s390x)

package bpf_test

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/flowdedup/flowdedup/bpf"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
)

// The Go twin of xdp.c's fd_hash and of the row and fingerprint it derives.
const (
	hM0 = 0x9E3779B185EBCA87
	hM1 = 0xC2B2AE3D27D4EB4F
	hM2 = 0x165667B19E3779F9
	hM3 = 0x85EBCA77C2B2AE63
	hM4 = 0x27D4EB2F165667C5
	hF1 = 0xFF51AFD7ED558CCD
	hF2 = 0xC4CEB9FE1A85EC53
)

func hashMix(w, seed, m uint64) uint64 {
	w = (w ^ seed) * m
	w ^= w >> 32
	w *= hF1
	return w ^ w>>29
}

// keyHash hashes the 40 bytes of a key's binary form, read as five
// little-endian words (the program's loads on a little-endian machine).
func keyHash(b []byte, seed uint64) uint64 {
	h := hashMix(binary.LittleEndian.Uint64(b[0:]), seed, hM0) +
		hashMix(binary.LittleEndian.Uint64(b[8:]), seed, hM1) +
		hashMix(binary.LittleEndian.Uint64(b[16:]), seed, hM2) +
		hashMix(binary.LittleEndian.Uint64(b[24:]), seed, hM3) +
		hashMix(binary.LittleEndian.Uint64(b[32:]), seed, hM4)
	h ^= h >> 32
	h *= hF2
	return h ^ h>>32
}

// rowFP is the row (of rows) and the fingerprint the program derives from h.
func rowFP(h uint64, rows uint32) (uint32, uint32) {
	row := uint32((h >> 32) * uint64(rows) >> 32)
	fp := uint32(h)
	if fp == 0 {
		fp = 1
	}
	return row, fp
}

// TestHashTwin checks the Go twin against the program: each key, alone in
// a fresh prefilter, must sit in the row and with the fingerprint the twin
// gives.
func TestHashTwin(t *testing.T) {
	const rows, seed = 61, 0x0123456789abcdef
	cpu := -1
	for i := range 20 {
		h := newHarness(t, bpf.Config{Kind: flow.Key5Tuple, Seed: seed, PrefilterBytes: rows * bpf.RowBytes, RingBytes: 1 << 16})
		if cpu < 0 {
			cpu = testutil.PinThread(t)
		}
		var f []byte
		if i%2 == 0 {
			f = tcp4([4]byte{10, 0, byte(i), 1}, b4, uint16(1000*i), 443)
		} else {
			src := a6
			src[7] = byte(i)
			f = udp6(src, b6, 53, uint16(i))
		}
		k := key5(t, f)
		h.mustRun(f)
		kb, _ := k.AppendBinary(nil)
		wantRow, wantFP := rowFP(keyHash(kb, seed), rows)
		rs, err := h.o.PrefilterRows(cpu)
		if err != nil {
			t.Fatal(err)
		}
		for r, row := range rs {
			for b, fp := range row.Fp {
				if fp != 0 && (uint32(r) != wantRow || b != 0 || fp != wantFP) {
					t.Errorf("key %v: row %d bucket %d holds %#x; the twin says row %d bucket 0, %#x", k, r, b, fp, wantRow, wantFP)
				}
			}
		}
		if rs[wantRow].Fp[0] != wantFP {
			t.Errorf("key %v: row %d holds %#x, want %#x", k, wantRow, rs[wantRow].Fp, wantFP)
		}
	}
}

// TestHashAvalanche: flipping any one bit of a key flips each bit of the
// hash with probability 1/2, so the row (high half) and the fingerprint
// (low half) both depend on every key bit. Over 10000 random keys and
// seeds the standard error is 0.005: a bias beyond 0.03 (6 sigma) is a
// defect, not chance.
func TestHashAvalanche(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 8))
	const n = 10000
	var flips [320][64]int
	b := make([]byte, flow.KeySize)
	for range n {
		for i := range b {
			b[i] = byte(rnd.Uint32())
		}
		seed := rnd.Uint64()
		h := keyHash(b, seed)
		for bit := range 320 {
			b[bit/8] ^= 1 << (bit % 8)
			d := h ^ keyHash(b, seed)
			b[bit/8] ^= 1 << (bit % 8)
			for o := range 64 {
				flips[bit][o] += int(d >> o & 1)
			}
		}
	}
	worst := 0.0
	for bit := range flips {
		for o, c := range flips[bit] {
			p := float64(c) / n
			if p < 0.47 || p > 0.53 {
				t.Errorf("flipping key bit %d flips hash bit %d with probability %.3f", bit, o, p)
			}
			worst = max(worst, abs(p-0.5))
		}
	}
	t.Logf("worst bias %.3f over %d keys", worst, n)
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestHashRows: the keys of structured traffic (consecutive IPv4 sources,
// all else equal) spread evenly over the rows: a chi-square test of the
// row counts, and no fingerprint collision within a row among them.
func TestHashRows(t *testing.T) {
	const rows, n = 256, 256 * 64
	counts := make([]int, rows)
	fps := make(map[[2]uint32]bool)
	collisions := 0
	for i := range n {
		var src [4]byte
		binary.BigEndian.PutUint32(src[:], 0x0a000000+uint32(i))
		k, err := flow.Parse(tcp4(src, b4, 40000, 443), flow.LinkEthernet, flow.KeySrc)
		if err != nil {
			t.Fatal(err)
		}
		kb, _ := k.AppendBinary(nil)
		r, fp := rowFP(keyHash(kb, 99), rows)
		counts[r]++
		if fps[[2]uint32{r, fp}] {
			collisions++
		}
		fps[[2]uint32{r, fp}] = true
	}
	exp := float64(n) / rows
	chi2 := 0.0
	for _, c := range counts {
		chi2 += (float64(c) - exp) * (float64(c) - exp) / exp
	}
	// 255 degrees of freedom: mean 255, sd 22.6; 360 is p < 1e-4.
	if chi2 > 360 {
		t.Errorf("chi-square of %d keys over %d rows: %.1f", n, rows, chi2)
	}
	// 256 rows of 64 keys: 256 * 64*63/2 pairs that share a row, each
	// colliding with probability 2^-32: 1.2e-4 collisions expected.
	if collisions != 0 {
		t.Errorf("%d fingerprint collisions", collisions)
	}
	t.Logf("chi-square %.1f (255 degrees of freedom), %d fingerprint collisions", chi2, collisions)
}
