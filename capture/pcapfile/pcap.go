package pcapfile

import (
	"fmt"
	"io"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
)

// pcapHeader reads the 24-byte pcap file header.
func (s *Reader) pcapHeader(magic uint32) error {
	h, err := s.peek(24)
	s.big = magic == pcapMicroBE || magic == pcapNanoBE
	if err != nil {
		if (err == io.EOF || err == io.ErrUnexpectedEOF) && (len(h) < 6 || s.u16(h[4:]) == 2) {
			gz := s.stats[s.cur].Compressed
			return s.cutHeader(&truncated{what: "the pcap file header", got: len(h), want: 24, gzip: gz, cut: gz && err == io.ErrUnexpectedEOF})
		}
		return s.headerErr(fmt.Errorf("pcap header: %w", s.readErr(err)))
	}
	s.format = kindPcap
	s.fracMul = 1e3
	st := &s.stats[s.cur]
	st.Format = "pcap"
	if magic == pcapNanoBE || magic == pcapNanoLE {
		s.fracMul = 1
		st.Format = "pcap-nsec"
	}
	if major, minor := s.u16(h[4:]), s.u16(h[6:]); major != 2 {
		return s.headerErr(fmt.Errorf("pcap version %d.%d not supported", major, minor))
	}
	// The upper bits of the link type field carry FCS information; libpcap
	// keeps the low 26 bits as the link type.
	s.link = flow.LinkType(s.u32(h[20:]) & 0x03ffffff)
	st.LinkType = s.link
	s.discard(24)
	s.offset = 24
	return nil
}

// pcapNext reads a pcap record: a 16-byte header (seconds, fraction,
// captured length, original length) and the captured bytes.
func (s *Reader) pcapNext(p *capture.Packet) error {
	s.release()
	h, err := s.peek(16)
	if err != nil {
		if len(h) == 0 && err == io.EOF {
			return io.EOF
		}
		return s.short("the record header", len(h), 16, err)
	}
	caplen := s.u32(h[8:])
	if caplen > MaxCaptureLength {
		return s.corrupt("captured length %d exceeds %d", caplen, MaxCaptureLength)
	}
	n := 16 + int(caplen)
	rec, err := s.peek(n)
	if err != nil {
		return s.short("the record data", len(rec)-16, int(caplen), err)
	}
	s.pcapRecord(p, rec)
	return nil
}

// pcapRecord returns the pcap record rec, header and data, in p.
func (s *Reader) pcapRecord(p *capture.Packet, rec []byte) {
	n := len(rec)
	caplen := uint32(n - 16)
	p.Data = rec[16:n:n]
	p.WireLen = int(max(s.u32(rec[12:]), caplen))
	p.TimeNs = int64(s.u32(rec[0:]))*1e9 + int64(s.u32(rec[4:]))*s.fracMul
	p.LinkType = s.link
	s.pending = n
}
