package export

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/record"
)

// The spool file format, version 3. A spool file holds one batch of
// records or one window summary on its way to one destination. All
// integers are big-endian.
//
//	offset     size  field
//	0          8     magic "FDDSPOOL"
//	8          2     version, 3
//	10         1     type: 1 a batch of records, 2 a window summary
//	11         1     flags: bit 0 "attempted": given to the destination
//	                 before, with an unknown outcome (record.Batch.Retry):
//	                 set, and synced, before each time it is given
//	                 (destSpool.markAttempted); bit 1
//	                 "domain": the observation domain follows the
//	                 observer (never set for a summary); other bits zero
//	12         8     batch ID (record.Batch.ID); 0 for a summary
//	20         4     records in the batch; 0 for a summary
//	24         4     payload length L
//	28         2     destination length D
//	30         D     destination: the --export URL without credentials
//	30+D       1     observer length O, at most record.MaxObserverLen; 0 for a
//	                 summary, whose payload holds its observer
//	31+D       O     observer (record.Batch.Observer): the --observer of the run
//	                 that produced the batch; empty for the sender's own
//	31+D+O     P     P = 4 with flag bit 1, else 0: the IPFIX observation
//	                 domain ID (record.Batch.Domain.ID) of the run that produced
//	                 the batch; without it, the sender's own
//	31+D+O+P   L     payload
//	31+D+O+P+L 4     CRC-32C (Castagnoli) of bytes [0, 31+D+O+P+L)
//
// A flag says whether the domain is there because every uint32 is a
// domain, 0 included: a batch without one (record.Batch.Domain not Valid) and one
// of domain 0 are different files.
//
// Version 1, written before batches carried their observer, is the same
// without the observer length, observer and domain (flag bit 1 is never
// set): the payload at 30+D and the CRC-32C of bytes [0, 30+D+L) after
// it. It is still read, as a batch without an observer or domain (the
// sender's own). The first 30 bytes mean the same in both versions.
//
// Version 2 is version 3 with the 40-byte keys of before segments
// (flow.KeySizeNoSegment), records of 68 bytes; it is still read.
//
// A batch's payload is its records, 72 bytes each: the key's binary form
// (flow.KeySize, 44 bytes, flow.Key.AppendBinary), then TimeNs, WindowNs
// and WindowEndNs (8 bytes each, two's complement) and Worker (4 bytes);
// Observer and Windowed are not kept (no export reads them: a record read
// back has them zero). A
// summary's payload is its --summary JSON line without the newline
// (SummaryWriter), which holds every field of a record.Summary.
const (
	spoolMagic      = "FDDSPOOL"
	spoolVersion    = 3 // written; versions 1 and 2 are read too
	spoolVersion2   = 2
	spoolVersion1   = 1
	spoolHeaderLen  = 30 // the fixed part of the header, the same in every version
	spoolCRCLen     = 4
	spoolRecordLen  = flow.KeySize + 8 + 8 + 8 + 4          // version 3
	spoolRecordLen2 = flow.KeySizeNoSegment + 8 + 8 + 8 + 4 // versions 1 and 2
	spoolTypeBatch  = 1
	spoolTypeWindow = 2
	spoolAttempted  = 1 // flags bit 0
	spoolHasDomain  = 2 // flags bit 1, version 2
	spoolDomainLen  = 4

	// maxSpoolRecords bounds the records of one spool file, so that a
	// corrupt count cannot make the reader allocate without bound; batches
	// are far smaller (QueueConfig.BatchSize).
	maxSpoolRecords = 1 << 22
	// maxSpoolFile bounds a spool file's size likewise.
	maxSpoolFile = spoolHeaderLen + 1<<16 + 1 + record.MaxObserverLen + spoolDomainLen + maxSpoolRecords*spoolRecordLen + spoolCRCLen
)

// ErrSpoolCorrupt is wrapped by the error of a spool file that cannot be
// read back: truncated, a bad checksum, an unknown version, a record that
// is not a valid key. Such a file is moved aside and counted, never sent.
var ErrSpoolCorrupt = errors.New("export: corrupt spool file")

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// toggledChecksum returns the CRC-32C of body, a spool file without its
// checksum, with the attempted flag the other way.
func toggledChecksum(body []byte) uint32 {
	c := crc32.Update(0, crc32c, body[:11])
	c = crc32.Update(c, crc32c, []byte{body[11] ^ spoolAttempted})
	return crc32.Update(c, crc32c, body[12:])
}

// appendSpoolFile appends the spool file of the batch b (when s is nil) or
// of the summary s, for the destination dest. A batch's observer must be
// at most record.MaxObserverLen bytes (destSpool.put checks).
func appendSpoolFile(buf []byte, dest string, b *record.Batch, s *record.Summary, attempted bool) []byte {
	start := len(buf)
	buf = append(buf, spoolMagic...)
	buf = binary.BigEndian.AppendUint16(buf, spoolVersion)
	typ := byte(spoolTypeBatch)
	if s != nil {
		typ = spoolTypeWindow
	}
	var flags byte
	if attempted {
		flags |= spoolAttempted
	}
	if s == nil && b.Domain.Valid {
		flags |= spoolHasDomain
	}
	buf = append(buf, typ, flags)
	var id uint64
	var count int
	if s == nil {
		id, count = b.ID, len(b.Records)
	}
	buf = binary.BigEndian.AppendUint64(buf, id)
	buf = binary.BigEndian.AppendUint32(buf, uint32(count))
	lenAt := len(buf)
	buf = binary.BigEndian.AppendUint32(buf, 0) // payload length, below
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(dest)))
	buf = append(buf, dest...)
	var observer string
	if s == nil {
		observer = b.Observer
	}
	buf = append(buf, byte(len(observer)))
	buf = append(buf, observer...)
	if flags&spoolHasDomain != 0 {
		buf = binary.BigEndian.AppendUint32(buf, b.Domain.ID)
	}
	payload := len(buf)
	if s == nil {
		for i := range b.Records {
			r := &b.Records[i]
			buf, _ = r.Key.AppendBinary(buf) // never fails
			buf = binary.BigEndian.AppendUint64(buf, uint64(r.TimeNs))
			buf = binary.BigEndian.AppendUint64(buf, uint64(r.WindowNs))
			buf = binary.BigEndian.AppendUint64(buf, uint64(r.WindowEndNs))
			buf = binary.BigEndian.AppendUint32(buf, uint32(r.Worker))
		}
	} else {
		buf = record.AppendSummary(buf, s)
		buf = buf[:len(buf)-1] // no newline
	}
	binary.BigEndian.PutUint32(buf[lenAt:], uint32(len(buf)-payload))
	return binary.BigEndian.AppendUint32(buf, crc32.Checksum(buf[start:], crc32c))
}

// spoolFile is a spool file as read back.
type spoolFile struct {
	summary   bool
	attempted bool
	id        uint64
	observer  string          // a batch's; empty for the sender's own (and in version 1)
	domain    record.Domain   // a batch's; not Valid for the sender's own (and in version 1)
	records   []record.Record // a batch's, in the buffer given to decodeSpoolFile
	sum       record.Summary  // a summary's
}

// spoolHeader reads the fixed header of a spool file: its type and record
// count, for the gauges, without reading the rest.
func spoolHeader(data []byte) (summary bool, count int, ok bool) {
	if len(data) < spoolHeaderLen || string(data[:8]) != spoolMagic {
		return false, 0, false
	}
	return data[10] == spoolTypeWindow, int(binary.BigEndian.Uint32(data[20:])), true
}

// decodeSpoolFile reads the spool file data, which must be for dest. A
// batch's records go into recs (grown as needed; f.records re-slices it).
// Any defect is an error wrapping ErrSpoolCorrupt; it never panics, and
// reads nothing past data.
func decodeSpoolFile(data []byte, dest string, recs []record.Record, f *spoolFile) error {
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrSpoolCorrupt}, args...)...)
	}
	if len(data) < spoolHeaderLen+spoolCRCLen {
		return corrupt("%d bytes, shorter than a header", len(data))
	}
	if string(data[:8]) != spoolMagic {
		return corrupt("not a spool file (magic %q)", data[:8])
	}
	version := binary.BigEndian.Uint16(data[8:])
	if version != spoolVersion && version != spoolVersion2 && version != spoolVersion1 {
		return corrupt("version %d, this flowdedup reads versions %d to %d", version, spoolVersion1, spoolVersion)
	}
	// Versions 2 and 3 have an observer and a domain; 1 and 2 keys of
	// 40 bytes.
	withObserver := version != spoolVersion1
	keyLen, recLen := uint64(flow.KeySize), uint64(spoolRecordLen)
	if version != spoolVersion {
		keyLen, recLen = flow.KeySizeNoSegment, spoolRecordLen2
	}
	typ, flags := data[10], data[11]
	if typ != spoolTypeBatch && typ != spoolTypeWindow {
		return corrupt("unknown type %d", typ)
	}
	known := byte(spoolAttempted)
	if withObserver {
		known |= spoolHasDomain
	}
	if flags&^known != 0 {
		return corrupt("unknown flags %#x in version %d", flags, version)
	}
	id := binary.BigEndian.Uint64(data[12:])
	count := uint64(binary.BigEndian.Uint32(data[20:]))
	payloadLen := uint64(binary.BigEndian.Uint32(data[24:]))
	destLen := uint64(binary.BigEndian.Uint16(data[28:]))
	// at: where the payload begins; from version 2, after the observer
	// and the domain.
	at := spoolHeaderLen + destLen
	var obsAt, obsLen, domLen uint64
	if withObserver {
		if uint64(len(data)) < at+1+spoolCRCLen {
			return corrupt("%d bytes, shorter than a header with a destination of %d", len(data), destLen)
		}
		obsLen = uint64(data[at])
		obsAt = at + 1
		if flags&spoolHasDomain != 0 {
			domLen = spoolDomainLen
		}
		at = obsAt + obsLen + domLen
	}
	if want := at + payloadLen + spoolCRCLen; uint64(len(data)) != want {
		return corrupt("%d bytes, the header says %d", len(data), want)
	}
	body := len(data) - spoolCRCLen
	if got, want := crc32.Checksum(data[:body], crc32c), binary.BigEndian.Uint32(data[body:]); got != want {
		// destSpool.markAttempted writes the checksum of the file with
		// the attempted flag set, then the flag: a power loss before
		// both reached the disk leaves one of them. The file is whole:
		// it is taken as attempted (the safe reading; it was not sent).
		if toggledChecksum(data[:body]) != want {
			return corrupt("checksum %08x, want %08x", got, want)
		}
		flags |= spoolAttempted
	}
	if d := string(data[spoolHeaderLen : spoolHeaderLen+destLen]); d != dest {
		return corrupt("for destination %q, not %q", d, dest)
	}
	payload := data[at:body]
	*f = spoolFile{summary: typ == spoolTypeWindow, attempted: flags&spoolAttempted != 0, id: id}
	if f.summary {
		if count != 0 || id != 0 || obsLen != 0 || domLen != 0 {
			return corrupt("a summary with a record count, batch ID, observer or domain")
		}
		if err := record.ParseSummary(payload, &f.sum); err != nil {
			return corrupt("summary: %v", err)
		}
		return nil
	}
	if count > maxSpoolRecords || payloadLen != count*recLen {
		return corrupt("%d records in %d bytes", count, payloadLen)
	}
	if obsLen > 0 {
		f.observer = string(data[obsAt : obsAt+obsLen])
	}
	if domLen > 0 {
		f.domain = record.Domain{ID: binary.BigEndian.Uint32(data[obsAt+obsLen:]), Valid: true}
	}
	recs = recs[:0]
	for p := payload; len(p) > 0; p = p[recLen:] {
		var r record.Record
		if err := r.Key.UnmarshalBinary(p[:keyLen]); err != nil {
			return corrupt("record %d: %v", len(recs), err)
		}
		t := p[keyLen:]
		r.TimeNs = int64(binary.BigEndian.Uint64(t[0:]))
		r.WindowNs = int64(binary.BigEndian.Uint64(t[8:]))
		r.WindowEndNs = int64(binary.BigEndian.Uint64(t[16:]))
		w := int32(binary.BigEndian.Uint32(t[24:]))
		if w < 0 {
			return corrupt("record %d: worker %d", len(recs), w)
		}
		r.Worker = int(w)
		recs = append(recs, r)
	}
	f.records = recs
	return nil
}
