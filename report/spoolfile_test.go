package report

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"slices"
	"testing"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/pipeline"
)

func TestSpoolFileRoundTrip(t *testing.T) {
	var recs []pipeline.Record
	for _, tc := range recordCases { // every key kind and family
		recs = append(recs, tc.rec)
	}
	recs = append(recs, genRecords(0, 3)...)
	recs[0].TimeNs, recs[1].WindowNs = -5, -1<<62 // any int64 goes through
	b := Batch{ID: 1<<63 + 5, Records: recs}
	for _, attempted := range []bool{false, true} {
		data := appendSpoolFile([]byte("junk before"), "ipfix://[::1]:4739", &b, nil, attempted)[len("junk before"):]
		if want := spoolHeaderLen + len("ipfix://[::1]:4739") + len(recs)*spoolRecordLen + spoolCRCLen; len(data) != want {
			t.Errorf("%d bytes, want %d", len(data), want)
		}
		var f spoolFile
		if err := decodeSpoolFile(data, "ipfix://[::1]:4739", nil, &f); err != nil {
			t.Fatal(err)
		}
		if f.summary || f.id != b.ID || f.attempted != attempted || !slices.Equal(f.records, recs) {
			t.Errorf("read back %+v", f)
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

// TestSpoolFileDefects: each defect is ErrSpoolCorrupt, with the checksum
// made right so that the check behind it is the one tested.
func TestSpoolFileDefects(t *testing.T) {
	good := appendSpoolFile(nil, "d", &Batch{ID: 9, Records: genRecords(0, 2)}, nil, false)
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
		"version":     edit(func(b []byte) []byte { b[9] = 2; return reseal(b) }),
		"type":        edit(func(b []byte) []byte { b[10] = 3; return reseal(b) }),
		"flags":       edit(func(b []byte) []byte { b[11] = 2; return reseal(b) }),
		"count":       edit(func(b []byte) []byte { b[23] = 3; return reseal(b) }),
		"length":      edit(func(b []byte) []byte { b[27]++; return reseal(b) }),
		"truncated":   good[:len(good)-1],
		"extended":    append(bytes.Clone(good), 0),
		"checksum":    edit(func(b []byte) []byte { b[len(b)-1]++; return b }),
		"bit flip":    edit(func(b []byte) []byte { b[40] ^= 1; return b }),
		"destination": edit(func(b []byte) []byte { b[30] = 'e'; return reseal(b) }),
		"bad key":     edit(func(b []byte) []byte { b[31+39] = 1; return reseal(b) }), // a key's padding byte
		"worker":      edit(func(b []byte) []byte { b[31+64] = 0x80; return reseal(b) }),
		"summary":     appendSpoolFile(nil, "d", nil, &Summary{WindowSummary: pipeline.WindowSummary{StartNs: 2, EndNs: 1}}, false),
	} {
		var f spoolFile
		if err := decodeSpoolFile(data, "d", nil, &f); !errors.Is(err, ErrSpoolCorrupt) {
			t.Errorf("%s: %v, want ErrSpoolCorrupt", name, err)
		}
	}
}

// FuzzSpoolFile: any bytes decode without a panic, and a batch file that
// decodes is the encoding of what it decoded to (the format has one
// encoding per batch); a summary file re-encodes to one that decodes the
// same.
func FuzzSpoolFile(f *testing.F) {
	f.Add(appendSpoolFile(nil, "d", &Batch{ID: 9, Records: genRecords(0, 2)}, nil, false))
	f.Add(appendSpoolFile(nil, "d", &Batch{ID: 1, Records: []pipeline.Record{recordCases[1].rec, recordCases[5].rec}}, nil, true))
	f.Add(appendSpoolFile(nil, "d", nil, &fullSummary, false))
	f.Add(appendSpoolFile(nil, "d", &Batch{}, nil, false))
	f.Add([]byte(spoolMagic))
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
		if !sf.summary {
			again := appendSpoolFile(nil, "d", &Batch{ID: sf.id, Records: sf.records}, nil, sf.attempted)
			if !bytes.Equal(again, data) {
				t.Fatalf("decoded and encoded again:\n%x\nwant\n%x", again, data)
			}
			return
		}
		again := appendSpoolFile(nil, "d", nil, &sf.sum, sf.attempted)
		var back spoolFile
		// Compared by their lines: an absent map reads as nil, {} as empty.
		if err := decodeSpoolFile(again, "d", nil, &back); err != nil || !back.summary || back.attempted != sf.attempted ||
			!bytes.Equal(appendSummary(nil, &back.sum), appendSummary(nil, &sf.sum)) {
			t.Fatalf("summary re-encoded reads back %+v, %v; want %+v", back, err, sf)
		}
	}
}
