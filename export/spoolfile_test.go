package export

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/record"
	"github.com/flowdedup/flowdedup/record/recordtest"
)

func TestSpoolFileRoundTrip(t *testing.T) {
	recs := everyKind()
	recs = append(recs, genRecords(0, 3)...)
	recs[0].TimeNs, recs[1].WindowNs = -5, -1<<62 // any int64 goes through
	// No domain, domain 0 (a domain like any other, not "none"), the
	// largest.
	domains := []record.Domain{{}, {ID: 0, Valid: true}, {ID: 7, Valid: true}, {ID: 1<<32 - 1, Valid: true}}
	for _, observer := range []string{"", "edge-fra1", strings.Repeat("o", record.MaxObserverLen)} {
		for _, dom := range domains {
			b := record.Batch{ID: 1<<63 + 5, Records: recs, Observer: observer, Domain: dom}
			for _, attempted := range []bool{false, true} {
				data := appendSpoolFile([]byte("junk before"), "ipfix://[::1]:4739", &b, nil, attempted)[len("junk before"):]
				// The header, the destination, the observer with its
				// length byte, the domain when there is one, the
				// records, the checksum.
				domLen := 0
				if dom.Valid {
					domLen = 4
				}
				if want := spoolHeaderLen + len("ipfix://[::1]:4739") + 1 + len(observer) + domLen + len(recs)*spoolRecordLen + spoolCRCLen; len(data) != want {
					t.Errorf("%d bytes, want %d", len(data), want)
				}
				if v := binary.BigEndian.Uint16(data[8:]); v != 3 {
					t.Errorf("written as version %d, want 3", v)
				}
				// The flags byte as documented: bit 0 attempted, bit 1
				// domain; the domain big-endian after the observer.
				wantFlags := byte(0)
				if attempted {
					wantFlags |= 1
				}
				if dom.Valid {
					wantFlags |= 2
					at := 30 + len("ipfix://[::1]:4739") + 1 + len(observer)
					if got := binary.BigEndian.Uint32(data[at:]); got != dom.ID {
						t.Errorf("domain %d written as %d", dom.ID, got)
					}
				}
				if data[11] != wantFlags {
					t.Errorf("flags %#x, want %#x", data[11], wantFlags)
				}
				var f spoolFile
				if err := decodeSpoolFile(data, "ipfix://[::1]:4739", nil, &f); err != nil {
					t.Fatal(err)
				}
				if f.summary || f.id != b.ID || f.attempted != attempted || f.observer != observer || f.domain != dom || !slices.Equal(f.records, recs) {
					t.Errorf("observer %q, domain %+v: read back %+v", observer, dom, f)
				}
			}
		}
	}
	data := appendSpoolFile(nil, "d", nil, &fullSummary, false)
	var f spoolFile
	if err := decodeSpoolFile(data, "d", nil, &f); err != nil {
		t.Fatal(err)
	}
	if !f.summary || !reflect.DeepEqual(f.sum, fullSummary) {
		t.Errorf("summary read back %+v", f.sum)
	}
	// The spool keeps a summary as its JSON line: the key kind goes with it.
	if f.sum.Key != flow.KeyDst {
		t.Errorf("summary read back with key kind %v, want dst", f.sum.Key)
	}
}

// spoolV3AsV2 returns the version 3 batch file b as version 2 writes it,
// built from the layouts the package documents: version 2, and each
// record's key without its last 4 bytes (a segment, which must be zero).
func spoolV3AsV2(t *testing.T, b []byte) []byte {
	t.Helper()
	at := 30 + int(binary.BigEndian.Uint16(b[28:])) // the observer's length byte
	at += 1 + int(b[at])
	if b[11]&2 != 0 {
		at += 4 // the domain
	}
	count := int(binary.BigEndian.Uint32(b[20:]))
	out := bytes.Clone(b[:at])
	binary.BigEndian.PutUint16(out[8:], 2)
	binary.BigEndian.PutUint32(out[24:], uint32(count*68))
	for i := range count {
		rec := b[at+i*72 : at+(i+1)*72]
		if !bytes.Equal(rec[40:44], []byte{0, 0, 0, 0}) {
			t.Fatalf("record %d has a segment: %x", i, rec[40:44])
		}
		out = append(append(out, rec[:40]...), rec[44:]...)
	}
	return binary.BigEndian.AppendUint32(out, crc32.Checksum(out, crc32.MakeTable(crc32.Castagnoli)))
}

// appendSpoolFileV1 appends the version 1 spool file of the batch b (when
// s is nil) or the summary s, built by hand from the layout of version 1
// as the package documents it: what a flowdedup before batches carried
// their observer left in a spool.
func appendSpoolFileV1(buf []byte, dest string, b *record.Batch, s *record.Summary, attempted bool) []byte {
	var payload []byte
	typ, id, count := byte(1), uint64(0), 0
	if s != nil {
		typ = 2
		line := record.AppendSummary(nil, s)
		payload = line[:len(line)-1]
	} else {
		id, count = b.ID, len(b.Records)
		for _, r := range b.Records {
			kb, _ := r.Key.AppendBinary(nil)
			payload = append(payload, kb[:40]...) // version 1: the 40-byte keys of before segments
			for _, v := range []int64{r.TimeNs, r.WindowNs, r.WindowEndNs} {
				payload = binary.BigEndian.AppendUint64(payload, uint64(v))
			}
			payload = binary.BigEndian.AppendUint32(payload, uint32(r.Worker))
		}
	}
	var flags byte
	if attempted {
		flags = 1
	}
	start := len(buf)
	buf = append(buf, "FDDSPOOL"...)                               // 0: magic
	buf = binary.BigEndian.AppendUint16(buf, 1)                    // 8: version 1
	buf = append(buf, typ, flags)                                  // 10: type, 11: flags
	buf = binary.BigEndian.AppendUint64(buf, id)                   // 12: batch ID
	buf = binary.BigEndian.AppendUint32(buf, uint32(count))        // 20: records
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(payload))) // 24: L
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(dest)))    // 28: D
	buf = append(buf, dest...)                                     // 30: destination
	buf = append(buf, payload...)                                  // 30+D: payload
	return binary.BigEndian.AppendUint32(buf, crc32.Checksum(buf[start:], crc32.MakeTable(crc32.Castagnoli)))
}

// TestSpoolFileVersion1: a version 1 file, left by a flowdedup before
// batches carried their observer, still reads: its batch with its ID,
// records and attempted flag and no observer (the sender's own), its
// summary whole.
func TestSpoolFileVersion1(t *testing.T) {
	recs := append(genRecords(0, 3), everyKind()[1], everyKind()[5])
	for _, attempted := range []bool{false, true} {
		data := appendSpoolFileV1(nil, "clickhouse://ch:8123/db", &record.Batch{ID: 77, Records: recs}, nil, attempted)
		if want := 30 + len("clickhouse://ch:8123/db") + len(recs)*68 + 4; len(data) != want {
			t.Fatalf("the test's version 1 file has %d bytes, want %d", len(data), want)
		}
		var f spoolFile
		if err := decodeSpoolFile(data, "clickhouse://ch:8123/db", nil, &f); err != nil {
			t.Fatal(err)
		}
		if f.summary || f.id != 77 || f.attempted != attempted || f.observer != "" || f.domain.Valid || !slices.Equal(f.records, recs) {
			t.Errorf("version 1 batch read back %+v", f)
		}
		if sum, n, ok := spoolHeader(data); !ok || sum || n != len(recs) {
			t.Errorf("version 1 header: summary %v, %d records, ok %v", sum, n, ok)
		}
	}
	data := appendSpoolFileV1(nil, "d", nil, &fullSummary, false)
	var f spoolFile
	if err := decodeSpoolFile(data, "d", nil, &f); err != nil {
		t.Fatal(err)
	}
	if !f.summary || !reflect.DeepEqual(f.sum, fullSummary) {
		t.Errorf("version 1 summary read back %+v", f.sum)
	}
	// The version 1 files of the fuzz corpus, bytes fixed in the
	// repository, read too: a batch with its three records, a summary.
	for name, want := range map[string]int{"version1-batch": 3, "version1-summary": -1} {
		data := readCorpusFile(t, "testdata/fuzz/FuzzSpoolFile/"+name)
		var f spoolFile
		if err := decodeSpoolFile(data, "d", nil, &f); err != nil {
			t.Errorf("%s: %v", name, err)
		} else if f.summary != (want < 0) || (want >= 0 && (len(f.records) != want || f.id != 1<<40 || !f.attempted || f.observer != "" || f.domain.Valid)) {
			t.Errorf("%s read back %+v", name, f)
		}
	}
}

// TestSpoolFileVersion2Corpus: the version 2 files of the fuzz corpus,
// bytes fixed in the repository, read as they were written: a batch with
// an observer and no domain (the sender's own), and one with an observer
// and domain 7, whose 4 bytes follow the observer.
func TestSpoolFileVersion2Corpus(t *testing.T) {
	for _, c := range []struct {
		name      string
		id        uint64
		attempted bool
		domain    record.Domain
	}{
		{"version2-batch-observer", 5, false, record.Domain{}},
		{"version2-batch-domain", 1 << 40, true, record.Domain{ID: 7, Valid: true}},
	} {
		data := readCorpusFile(t, "testdata/fuzz/FuzzSpoolFile/"+c.name)
		var f spoolFile
		if err := decodeSpoolFile(data, "d", nil, &f); err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if f.summary || len(f.records) != 2 || f.id != c.id || f.attempted != c.attempted || f.observer != "edge-fra1" || f.domain != c.domain {
			t.Errorf("%s read back %+v, want batch %d of 2 records, attempted %v, observer edge-fra1, domain %+v", c.name, f, c.id, c.attempted, c.domain)
		}
	}
}

// readCorpusFile returns the bytes of a fuzz corpus file of one []byte.
func readCorpusFile(t *testing.T, path string) []byte {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	head, quoted, ok := strings.Cut(strings.TrimSpace(string(text)), "\n[]byte(")
	if !ok || head != "go test fuzz v1" || !strings.HasSuffix(quoted, ")") {
		t.Fatalf("%s: not a corpus file of one []byte", path)
	}
	data, err := strconv.Unquote(strings.TrimSuffix(quoted, ")"))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return []byte(data)
}

// TestSpoolFileDefects: each defect is ErrSpoolCorrupt, with the checksum
// made right so that the check behind it is the one tested.
func TestSpoolFileDefects(t *testing.T) {
	good := appendSpoolFile(nil, "d", &record.Batch{ID: 9, Records: genRecords(0, 2), Observer: "r1"}, nil, false)
	const obsAt, payload = 31, 34 // the observer's length byte, the first record
	// The same with domain 7: the domain at 34, the first record at 38.
	withDom := appendSpoolFile(nil, "d", &record.Batch{ID: 9, Records: genRecords(0, 2), Observer: "r1", Domain: record.Domain{ID: 7, Valid: true}}, nil, false)
	const domAt = 34
	goodV1 := appendSpoolFileV1(nil, "d", &record.Batch{ID: 9, Records: genRecords(0, 2)}, nil, false)
	sum := appendSpoolFile(nil, "d", nil, &fullSummary, false)
	reseal := func(b []byte) []byte {
		n := len(b) - spoolCRCLen
		binary.BigEndian.PutUint32(b[n:], crc32.Checksum(b[:n], crc32c))
		return b
	}
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	for name, data := range map[string][]byte{
		"empty":       nil,
		"short":       good[:20],
		"magic":       edit(func(b []byte) []byte { b[0] = 'X'; return reseal(b) }),
		"version 0":   edit(func(b []byte) []byte { b[9] = 0; return reseal(b) }),
		"version 4":   edit(func(b []byte) []byte { b[9] = 4; return reseal(b) }),
		"type":        edit(func(b []byte) []byte { b[10] = 3; return reseal(b) }),
		"flags":       edit(func(b []byte) []byte { b[11] = 4; return reseal(b) }),
		"flags 0x80":  edit(func(b []byte) []byte { b[11] = 0x80; return reseal(b) }),
		"count":       edit(func(b []byte) []byte { b[23] = 3; return reseal(b) }),
		"length":      edit(func(b []byte) []byte { b[27]++; return reseal(b) }),
		"truncated":   good[:len(good)-1],
		"extended":    append(bytes.Clone(good), 0),
		"checksum":    edit(func(b []byte) []byte { b[len(b)-1]++; return b }),
		"bit flip":    edit(func(b []byte) []byte { b[40] ^= 1; return b }),
		"observer":    edit(func(b []byte) []byte { b[obsAt+1] = 'x'; return b }), // the checksum covers it
		"destination": edit(func(b []byte) []byte { b[30] = 'e'; return reseal(b) }),
		"bad key":     edit(func(b []byte) []byte { b[payload+39] = 1; return reseal(b) }), // a key's padding byte
		"worker":      edit(func(b []byte) []byte { b[payload+flow.KeySize+24] = 0x80; return reseal(b) }),
		"summary":     appendSpoolFile(nil, "d", nil, &record.Summary{WindowSummary: record.WindowSummary{StartNs: 2, EndNs: 1}}, false),
		// The observer's length says more or fewer bytes than there are.
		"observer longer":  edit(func(b []byte) []byte { b[obsAt]++; return reseal(b) }),
		"observer shorter": edit(func(b []byte) []byte { b[obsAt]--; return reseal(b) }),
		"observer 255":     edit(func(b []byte) []byte { b[obsAt] = 255; return reseal(b) }),
		// The destination's length reaches past where the observer's
		// length byte would be.
		"no observer length": edit(func(b []byte) []byte {
			binary.BigEndian.PutUint16(b[28:], uint16(len(b)-spoolHeaderLen-spoolCRCLen))
			binary.BigEndian.PutUint32(b[24:], 0)
			return reseal(b)
		}),
		// A summary holds its observer in its payload: one beside it is
		// not a file this package writes.
		"summary with observer": reseal(slices.Concat(sum[:obsAt], []byte{2, 'r', '1'}, sum[obsAt+1:])),
		// A version 2 file called version 1 and the other way round: the
		// lengths do not add up.
		"version 2 as 1": edit(func(b []byte) []byte { b[9] = 1; return reseal(b) }),
		"version 1 as 2": func() []byte { b := bytes.Clone(goodV1); b[9] = 2; return reseal(b) }(),
		// The domain flag without the domain's 4 bytes, and the domain's
		// bytes without the flag: the lengths do not add up.
		"domain flag, no domain": edit(func(b []byte) []byte { b[11] |= spoolHasDomain; return reseal(b) }),
		"domain, no flag":        func() []byte { b := bytes.Clone(withDom); b[11] &^= spoolHasDomain; return reseal(b) }(),
		// Version 1 has no domain: the flag is unknown there, even with
		// 4 bytes where a domain would be.
		"version 1 with domain flag": func() []byte {
			b := slices.Concat(goodV1[:30+1], []byte{0, 0, 0, 7}, goodV1[30+1:])
			b[11] |= spoolHasDomain
			binary.BigEndian.PutUint32(b[24:], binary.BigEndian.Uint32(b[24:])+4)
			return reseal(b)
		}(),
		// A summary's domain is no field of a summary.
		"summary with domain": func() []byte {
			b := slices.Concat(sum[:obsAt+1], []byte{0, 0, 0, 7}, sum[obsAt+1:])
			b[11] |= spoolHasDomain
			return reseal(b)
		}(),
		"domain truncated": func() []byte { return reseal(slices.Concat(withDom[:domAt+2], withDom[domAt+4:])) }(),
	} {
		var f spoolFile
		if err := decodeSpoolFile(data, "d", nil, &f); !errors.Is(err, ErrSpoolCorrupt) {
			t.Errorf("%s: %v, want ErrSpoolCorrupt", name, err)
		}
	}
	// The files the defects were made from are good.
	for name, data := range map[string][]byte{"good": good, "good v1": goodV1, "summary": sum, "with domain": withDom} {
		var f spoolFile
		if err := decodeSpoolFile(data, "d", nil, &f); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if withDom[domAt+3] != 7 || withDom[11] != spoolHasDomain {
		t.Errorf("the test's file with domain 7 has flags %#x and %x at %d", withDom[11], withDom[domAt:domAt+4], domAt)
	}
}

// FuzzSpoolFile: any bytes decode without a panic, and a batch file that
// decodes is the encoding of what it decoded to (the format has one
// encoding per batch); a summary file re-encodes to one that decodes the
// same.
func FuzzSpoolFile(f *testing.F) {
	f.Add(appendSpoolFile(nil, "d", &record.Batch{ID: 9, Records: genRecords(0, 2)}, nil, false))
	f.Add(appendSpoolFile(nil, "d", &record.Batch{ID: 1, Records: []record.Record{everyKind()[1], everyKind()[5]}}, nil, true))
	f.Add(appendSpoolFile(nil, "d", nil, &fullSummary, false))
	f.Add(appendSpoolFile(nil, "d", &record.Batch{}, nil, false))
	f.Add(appendSpoolFile(nil, "d", &record.Batch{ID: 3, Records: genRecords(5, 2), Observer: "edge-fra1"}, nil, true))
	f.Add(appendSpoolFile(nil, "d", &record.Batch{ID: 4, Records: genRecords(7, 2), Observer: "edge-fra1", Domain: record.Domain{ID: 7, Valid: true}}, nil, true))
	f.Add(appendSpoolFile(nil, "d", &record.Batch{ID: 5, Records: genRecords(9, 1), Domain: record.Domain{Valid: true}}, nil, false))
	f.Add(appendSpoolFileV1(nil, "d", &record.Batch{ID: 9, Records: genRecords(0, 2)}, nil, true))
	f.Add(appendSpoolFileV1(nil, "d", nil, &fullSummary, false))
	f.Add([]byte(spoolMagic))
	// Marks a power loss cut in half (destSpool.markAttempted).
	for _, torn := range tornMarks(appendSpoolFile(nil, "d", &record.Batch{ID: 6, Records: genRecords(3, 2)}, nil, false)) {
		f.Add(torn)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkSpoolFile(t, data)
		// The same with the checksum made right, so that the fuzzer
		// reaches the checks behind it.
		if len(data) >= spoolCRCLen {
			n := len(data) - spoolCRCLen
			sealed := bytes.Clone(data)
			binary.BigEndian.PutUint32(sealed[n:], crc32.Checksum(sealed[:n], crc32c))
			checkSpoolFile(t, sealed)
		}
	})
}

func checkSpoolFile(t *testing.T, data []byte) {
	{
		var sf spoolFile
		if err := decodeSpoolFile(data, "d", nil, &sf); err != nil {
			if !errors.Is(err, ErrSpoolCorrupt) {
				t.Fatalf("error %v does not wrap ErrSpoolCorrupt", err)
			}
			return
		}
		if body := len(data) - spoolCRCLen; crc32.Checksum(data[:body], crc32c) != binary.BigEndian.Uint32(data[body:]) {
			// A torn mark (tornMarks), read as attempted: it encodes
			// again as the file marked whole.
			data = slices.Clone(data)
			data[11] |= spoolAttempted
			binary.BigEndian.PutUint32(data[body:], crc32.Checksum(data[:body], crc32c))
		}
		if !sf.summary {
			b := &record.Batch{ID: sf.id, Records: sf.records, Observer: sf.observer, Domain: sf.domain}
			again := appendSpoolFile(nil, "d", b, nil, sf.attempted)
			if binary.BigEndian.Uint16(data[8:]) == 1 {
				// A version 1 file: it has no observer, is the hand-built
				// encoding of what it decoded to, and reads the same once
				// written again (as version 3).
				if sf.observer != "" || sf.domain.Valid {
					t.Fatalf("version 1 file read with observer %q, domain %+v", sf.observer, sf.domain)
				}
				if v1 := appendSpoolFileV1(nil, "d", b, nil, sf.attempted); !bytes.Equal(v1, data) {
					t.Fatalf("version 1 decoded and encoded again:\n%x\nwant\n%x", v1, data)
				}
				var back spoolFile
				if err := decodeSpoolFile(again, "d", nil, &back); err != nil || back.summary || back.id != sf.id ||
					back.attempted != sf.attempted || back.observer != "" || back.domain.Valid || !slices.Equal(back.records, sf.records) {
					t.Fatalf("version 1 batch written as version 3 reads back %+v, %v; want %+v", back, err, sf)
				}
				return
			}
			if binary.BigEndian.Uint16(data[8:]) == 2 {
				// A version 2 file: written again as version 3, it is
				// the same but for the version and the segment's 4 zero
				// bytes after each key.
				again = spoolV3AsV2(t, again)
			}
			if !bytes.Equal(again, data) {
				t.Fatalf("decoded and encoded again:\n%x\nwant\n%x", again, data)
			}
			return
		}
		again := appendSpoolFile(nil, "d", nil, &sf.sum, sf.attempted)
		var back spoolFile
		// Compared by their lines: an absent map reads as nil, {} as empty.
		if err := decodeSpoolFile(again, "d", nil, &back); err != nil || !back.summary || back.attempted != sf.attempted ||
			!bytes.Equal(record.AppendSummary(nil, &back.sum), record.AppendSummary(nil, &sf.sum)) {
			t.Fatalf("summary re-encoded reads back %+v, %v; want %+v", back, err, sf)
		}
	}
}

// everyKind returns a record of every key kind and address family, with
// windows, for the spool's round trips; then the same keys by network
// (--prefix 24,64), which the spool keeps with their prefix length.
func everyKind() []record.Record {
	var recs []record.Record
	for _, kind := range []flow.KeyKind{flow.KeySrc, flow.KeyDst, flow.KeyPair, flow.Key5Tuple} {
		for _, pair := range [][2]string{{"192.0.2.1", "198.51.100.7"}, {"2001:db8::1", "2001:db8:ffff::2"}} {
			k := flow.MakeKey(kind, netip.MustParseAddr(pair[0]), netip.MustParseAddr(pair[1]), 17, 5353, 53)
			recs = append(recs, record.Record{Key: k, TimeNs: at("2026-01-01T00:00:01.5Z"),
				WindowNs: at("2026-01-01T00:00:00Z"), WindowEndNs: at("2026-01-01T01:00:00Z"), Worker: 1})
		}
	}
	m, err := flow.ParseMask("24,64")
	if err != nil {
		panic(err)
	}
	for _, r := range recs[:len(recs):len(recs)] {
		m.Apply(&r.Key)
		recs = append(recs, r)
	}
	return recs
}

// fullSummary has every field set (recordtest.FullSummary), so that a
// round trip that lost one would show.
var fullSummary = recordtest.FullSummary()

// tornMarks returns the two files a mark of data (a spool file without the
// attempted flag) cut short by a power loss may leave: the checksum of the
// marked file without the flag, and the flag without the new checksum.
func tornMarks(data []byte) [][]byte {
	body := len(data) - spoolCRCLen
	crcOnly := slices.Clone(data)
	binary.BigEndian.PutUint32(crcOnly[body:], toggledChecksum(data[:body]))
	flagOnly := slices.Clone(data)
	flagOnly[11] |= spoolAttempted
	return [][]byte{crcOnly, flagOnly}
}

// A mark that reached the disk only in part (its checksum, or its flag)
// leaves a whole file read as attempted, the safe reading; a file with
// another bit changed is still corrupt.
func TestSpoolFileTornMark(t *testing.T) {
	recs := genRecords(0, 3)
	data := appendSpoolFile(nil, "d", &record.Batch{ID: 77, Records: recs}, nil, false)
	for i, torn := range tornMarks(data) {
		var f spoolFile
		if err := decodeSpoolFile(torn, "d", nil, &f); err != nil {
			t.Errorf("torn mark %d: %v", i, err)
			continue
		}
		if !f.attempted || f.id != 77 || !slices.Equal(f.records, recs) {
			t.Errorf("torn mark %d: attempted %v, batch %d of %d records; want attempted, batch 77 of %d", i, f.attempted, f.id, len(f.records), len(recs))
		}
	}
	for _, at := range []int{10, 12, 40, len(data) - 5} {
		bad := slices.Clone(tornMarks(data)[0])
		bad[at] ^= 1
		var f spoolFile
		if err := decodeSpoolFile(bad, "d", nil, &f); !errors.Is(err, ErrSpoolCorrupt) {
			t.Errorf("a torn mark with byte %d changed too: %v, want ErrSpoolCorrupt", at, err)
		}
	}
	// A file whose flag is set, with the checksum of it set, is read as it
	// is, as is one without.
	for _, attempted := range []bool{false, true} {
		var f spoolFile
		if err := decodeSpoolFile(appendSpoolFile(nil, "d", &record.Batch{ID: 1, Records: recs}, nil, attempted), "d", nil, &f); err != nil || f.attempted != attempted {
			t.Errorf("attempted %v read as %v, %v", attempted, f.attempted, err)
		}
	}
}
