package netflow

import "github.com/flowdedup/flowdedup/collect/internal/seqnum"

// Limits bound what a Session keeps, so that no exporter, however it
// misbehaves (or whoever spoofs its address), makes a collector's memory
// grow without bound. The zero value of a field takes its default.
type Limits struct {
	// MaxTemplates is the most templates (options templates included) a
	// Session keeps, over all its domains. A new one beyond it evicts one
	// not used since the last eviction (a CLOCK), counted in
	// Stats.TemplatesEvicted. Default 256.
	MaxTemplates int
	// MaxFields is the most fields a template may have; a template with
	// more is refused (BadTemplate). Default 128: the longest templates of
	// routers hold a few dozen.
	MaxFields int
	// MaxDomains is the most observation domains a Session keeps; a new
	// one beyond it evicts one that sent nothing since the last eviction,
	// counted in Stats.DomainsEvicted. Default 64.
	MaxDomains int
	// Budget, when not nil, bounds the memory of the templates of every
	// Session that shares it (see Budget); nil: MaxTemplates alone.
	Budget *Budget
}

// Default limits.
const (
	DefaultMaxTemplates = 256
	DefaultMaxFields    = 128
	DefaultMaxDomains   = 64
)

func (l Limits) withDefaults() Limits {
	if l.MaxTemplates <= 0 {
		l.MaxTemplates = DefaultMaxTemplates
	}
	if l.MaxFields <= 0 {
		l.MaxFields = DefaultMaxFields
	}
	if l.MaxDomains <= 0 {
		l.MaxDomains = DefaultMaxDomains
	}
	return l
}

// Reason says why (part of) a message was not decoded.
type Reason uint8

// Reasons, counted in Stats.Errors. Their labels (Reason.String) are
// stable: metrics and summaries use them.
const (
	// Truncated: the message is shorter than its header, than the length
	// its header gives, or a set runs past its end. The rest of the
	// message is skipped.
	Truncated Reason = iota
	// BadVersion: the version is not 5, 9 or 10. The message is skipped.
	BadVersion
	// BadSet: a set (flowset) header is invalid: a length below 4, or an
	// ID reserved by the protocol. The rest of the message is skipped.
	BadSet
	// BadTemplate: a template or options template is invalid: an ID below
	// 256, no fields or more than Limits.MaxFields, a field of the key or
	// the clock with a length its type cannot have, records of length 0
	// or longer than a message. The template is not kept.
	BadTemplate
	// NoTemplate: a data set whose template the Session does not have
	// (never sent, withdrawn or evicted). Counted once per set; its
	// records are skipped.
	NoTemplate
	// NumReasons is the number of reasons.
	NumReasons
)

var reasonLabels = [NumReasons]string{
	Truncated:   "truncated",
	BadVersion:  "bad_version",
	BadSet:      "bad_set",
	BadTemplate: "bad_template",
	NoTemplate:  "no_template",
}

// String returns the reason's label, e.g. "no_template".
func (r Reason) String() string {
	if r < NumReasons {
		return reasonLabels[r]
	}
	return "unknown"
}

// Stats are a Session's counters since it was made.
type Stats struct {
	Messages uint64 // messages whose header was read (not those counted as Truncated or BadVersion before it)
	Records  uint64 // flow records handed out by Next
	Options  uint64 // options data records read (clock, sampling)
	// Errors counts what was skipped, by Reason.
	Errors [NumReasons]uint64
	// Templates counts the templates stored (a refresh identical to the
	// stored template is not counted).
	Templates        uint64
	TemplatesEvicted uint64 // dropped for room (Limits.MaxTemplates)
	Withdrawn        uint64 // IPFIX template withdrawals obeyed
	DomainsEvicted   uint64 // dropped for room (Limits.MaxDomains)
}

// Domain is what a Session knows of one observation domain (v9 source ID,
// IPFIX observation domain ID, v5 engine type and ID).
type Domain struct {
	// ID is the domain's ID: the v9 source ID, the IPFIX observation
	// domain ID, or (v5) the engine type << 8 | the engine ID.
	ID uint32
	// Tag is the caller's: a collector keeps here what it keys the
	// domain's records with (its observer). nil until the caller sets
	// it.
	Tag any

	// Seq counts the messages and records lost in transit, from the
	// sequence numbers: v9 numbers messages, v5 and IPFIX records.
	Seq seqnum.Counter
	// SamplingRate is the exporter's packet sampling rate for this domain,
	// 1 in N, from the v5 header, v9 or IPFIX options records
	// (samplingInterval, samplerRandomInterval, samplingPacketInterval and
	// samplingPacketSpace) or flow records that carry it; 0 when never
	// said (which collectors read as unsampled).
	SamplingRate uint32

	initMs  uint64 // IPFIX systemInitTimeMilliseconds, 0 unknown
	version uint16
	used    bool // sent something since the last eviction pass (CLOCK)
}

// Session is what a collector keeps of one transport session of an
// exporter: its templates and its observation domains. Make one with
// NewSession. A Session is used by one goroutine at a time.
type Session struct {
	// Stats are the Session's counters. The caller may read them between
	// calls, and reset them.
	Stats Stats

	lim       Limits
	templates map[templateKey]*template
	clock     []templateKey // the templates in insertion order, for the CLOCK
	hand      int           // the CLOCK's hand in clock
	domains   map[uint32]*Domain
	dclock    []uint32
	dhand     int
	scratch   template // templates are compiled here, then copied if new
	bytes     int64    // the cost of the templates (Budget)
}

// NewSession returns an empty Session bounded by lim.
func NewSession(lim Limits) *Session {
	lim = lim.withDefaults()
	return &Session{
		lim:       lim,
		templates: make(map[templateKey]*template),
		domains:   make(map[uint32]*Domain),
	}
}

// Domains calls f with each domain the Session keeps, in no order.
func (s *Session) Domains(f func(*Domain)) {
	for _, d := range s.domains {
		f(d)
	}
}

// domain returns the state of domain id of a message of version v,
// making it (and evicting another when the Session is full) if new.
func (s *Session) domain(id uint32, v uint16) *Domain {
	if d, ok := s.domains[id]; ok {
		d.used = true
		if d.version != v {
			// The exporter changed protocol: its sequence numbers count
			// something else now.
			d.version = v
			d.Seq.Unknown()
		}
		return d
	}
	if len(s.domains) >= s.lim.MaxDomains {
		s.evictDomain()
	}
	d := &Domain{ID: id, version: v} // used from its second message on: a flood of new domains evicts itself first
	s.domains[id] = d
	s.dclock = append(s.dclock, id)
	return d
}

// evictDomain drops one domain, the first the CLOCK finds unused since
// its last pass.
func (s *Session) evictDomain() {
	for range 2 * len(s.dclock) {
		if s.dhand >= len(s.dclock) {
			s.dhand = 0
		}
		id := s.dclock[s.dhand]
		d := s.domains[id]
		if d.used {
			d.used = false
			s.dhand++
			continue
		}
		delete(s.domains, id)
		s.dclock = append(s.dclock[:s.dhand], s.dclock[s.dhand+1:]...)
		s.Stats.DomainsEvicted++
		return
	}
}
