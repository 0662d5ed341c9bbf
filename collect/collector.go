package collect

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/collect/netflow"
	"github.com/flowdedup/flowdedup/flow"
)

// Defaults of Config's zero fields.
const (
	// DefaultRcvbuf is each UDP socket's receive buffer: softflowd
	// reading a 38,000-flow capture sends about 1,250 datagrams of 1,400
	// bytes at once, which the kernel charges about 4.5 MiB for; 32 MiB
	// takes several such bursts while the pipeline is busy.
	DefaultRcvbuf = 32 << 20
	// DefaultPollInterval is how long Next waits for a datagram before it
	// returns capture.ErrTimeout, so that the pipeline hands on what it
	// holds on a quiet network and notices a stop.
	DefaultPollInterval = 100 * time.Millisecond
	// DefaultMaxObservers bounds the exporters' observation domains the
	// collector numbers (and labels metrics with); the ones after share
	// the observer OtherName.
	DefaultMaxObservers = 1024
	// DefaultMaxExporters bounds the exporters' transport sessions (UDP
	// source address and port) the collector keeps templates and
	// sequence numbers for.
	DefaultMaxExporters = 1024
	// DefaultTCPIdleTimeout is how long an IPFIX-over-TCP connection may
	// send nothing before it is closed (an exporter sends templates, and
	// flowdedup's own export its records, well within it).
	DefaultTCPIdleTimeout = 5 * time.Minute
	// DefaultTCPMessageTimeout is how long an IPFIX message whose first
	// bytes came may take to come whole (64 KiB at 20 kbit/s).
	DefaultTCPMessageTimeout = 30 * time.Second
	// tcpDrainGrace is how long Drain reads the TCP connections on for
	// the messages they are still sending.
	tcpDrainGrace = 100 * time.Millisecond
)

// Config says what a Collector listens on and how it keys.
type Config struct {
	// Listeners are the addresses to listen on (ParseListener).
	Listeners []Listener
	// Allow, when not empty, are the exporter addresses taken: datagrams
	// and connections from others are counted (RejectedExporter) and
	// dropped.
	Allow []netip.Prefix
	// Key is the key kind of the records.
	Key flow.KeyKind
	// Sockets is the number of UDP sockets per UDP listener, each a
	// Source of its own read by its own goroutine (SO_REUSEPORT: the
	// kernel spreads exporters over them, each exporter to one socket).
	// 0 means 1.
	Sockets int
	// Rcvbuf is each UDP socket's receive buffer in bytes; 0 means
	// DefaultRcvbuf.
	Rcvbuf int
	// PollInterval: 0 means DefaultPollInterval.
	PollInterval time.Duration
	// MaxObservers, MaxExporters: 0 means the defaults.
	MaxObservers, MaxExporters int
	// TCPIdleTimeout closes an IPFIX-over-TCP connection on which no
	// message began for that long, TCPMessageTimeout one whose message
	// began but was not whole within it (both counted, Stats). 0 means
	// DefaultTCPIdleTimeout, DefaultTCPMessageTimeout.
	TCPIdleTimeout, TCPMessageTimeout time.Duration
	// Limits bound each exporter's templates and domains.
	Limits netflow.Limits
	// Hostile networks (issue 25). TemplateMemory bounds the bytes of
	// every UDP exporter's and TCP connection's templates together
	// (netflow.Budget); 0 means netflow.DefaultTemplateMemory.
	// ObserversPerAddress is the share of MaxObservers one source
	// address may take; 0 means DefaultObserversPerAddress.
	// ObserverIdle is how long an observer may be silent before it
	// leaves the registry; 0 means DefaultObserverIdle. MaxClockAhead is
	// how far a record's start may be after its arrival before the
	// arrival is taken (counted, StartAhead); 0 means
	// DefaultMaxClockAhead.
	TemplateMemory      int64
	ObserversPerAddress int
	ObserverIdle        time.Duration
	MaxClockAhead       time.Duration
	// Warnings receives a line when a socket's receive buffer is smaller
	// than Rcvbuf (the kernel caps it at net.core.rmem_max without
	// CAP_NET_ADMIN). nil: none.
	Warnings io.Writer
}

// Collector listens for flow records and hands them to the pipeline as
// one capture.Source (see source).
type Collector struct {
	cfg   Config
	reg   *registry
	src   *source
	addrs []string
}

// Open binds every listener. It fails if any cannot be bound.
func Open(cfg Config) (*Collector, error) {
	if len(cfg.Listeners) == 0 {
		return nil, errors.New("collect: nothing to listen on")
	}
	if !cfg.Key.IsValid() {
		return nil, fmt.Errorf("collect: %w: %v", flow.ErrBadKind, cfg.Key)
	}
	if cfg.Sockets <= 0 {
		cfg.Sockets = 1
	}
	if cfg.Rcvbuf <= 0 {
		cfg.Rcvbuf = DefaultRcvbuf
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.MaxObservers <= 0 {
		cfg.MaxObservers = DefaultMaxObservers
	}
	if cfg.MaxExporters <= 0 {
		cfg.MaxExporters = DefaultMaxExporters
	}
	if cfg.TCPIdleTimeout <= 0 {
		cfg.TCPIdleTimeout = DefaultTCPIdleTimeout
	}
	if cfg.TCPMessageTimeout <= 0 {
		cfg.TCPMessageTimeout = DefaultTCPMessageTimeout
	}
	if cfg.TemplateMemory <= 0 {
		cfg.TemplateMemory = netflow.DefaultTemplateMemory
	}
	if cfg.ObserversPerAddress <= 0 {
		cfg.ObserversPerAddress = DefaultObserversPerAddress
	}
	if cfg.ObserverIdle <= 0 {
		cfg.ObserverIdle = DefaultObserverIdle
	}
	if cfg.MaxClockAhead <= 0 {
		cfg.MaxClockAhead = DefaultMaxClockAhead
	}
	if cfg.Limits.Budget == nil {
		cfg.Limits.Budget = netflow.NewBudget(cfg.TemplateMemory)
	}
	c := &Collector{cfg: cfg, reg: newRegistry(cfg.MaxObservers, cfg.ObserversPerAddress, cfg.ObserverIdle)}
	st := new(sourceStats)
	s := &source{
		decoder: decoder{kind: cfg.Key, reg: c.reg, stats: st, lim: cfg.Limits, ahead: int64(cfg.MaxClockAhead)},
		done:    make(chan struct{}),
		drained: make(chan struct{}),
		timer:   time.NewTimer(time.Hour),
		timeout: cfg.PollInterval,
		allow:   cfg.Allow,
		exps:    newExporters(cfg.MaxExporters, cfg.Limits, st),
	}
	s.timer.Stop()
	c.src = s
	type udp struct {
		rx    *receiver
		proto Protocol
	}
	var udps []udp
	for _, l := range cfg.Listeners {
		if l.Protocol == IPFIXTCP {
			tl, err := listenTCP(l.Addr, cfg.TCPIdleTimeout, cfg.TCPMessageTimeout)
			if err != nil {
				s.Close()
				return nil, fmt.Errorf("collect: listen on %s: %w", l, err)
			}
			tl.src = s
			s.tls = append(s.tls, tl)
			c.addrs = append(c.addrs, tl.ln.Addr().String())
			continue
		}
		addr := l.Addr
		for i := range cfg.Sockets {
			rx, granted, err := listenUDP(addr, cfg.Rcvbuf)
			if err != nil {
				s.Close()
				return nil, fmt.Errorf("collect: listen on %s: %w", l, err)
			}
			s.rxs = append(s.rxs, rx)
			udps = append(udps, udp{rx, l.Protocol})
			if i == 0 {
				// Port 0: the others join the port the kernel gave the first.
				addr = rx.localAddr().String()
				c.addrs = append(c.addrs, addr)
				if granted < cfg.Rcvbuf && cfg.Warnings != nil {
					fmt.Fprintf(cfg.Warnings, "flowdedup collect: warning: %s: receive buffer %d bytes, not the %d asked for: a burst of datagrams may be dropped (counted as dropped_by kernel); run with CAP_NET_ADMIN, or raise the limit: sysctl -w net.core.rmem_max=%d\n",
						l, granted, cfg.Rcvbuf, cfg.Rcvbuf)
				}
				if err := rx.dropCountErr(); err != nil && cfg.Warnings != nil {
					fmt.Fprintf(cfg.Warnings, "flowdedup collect: warning: %s: datagrams the kernel drops for want of buffer may go uncounted (%v)\n", l, err)
				}
			}
		}
	}
	s.units = make(chan unit, len(s.rxs)*batchesPerSocket+len(s.tls)*tcpBuffers)
	for _, u := range udps {
		s.wg.Go(func() { s.readUDP(u.rx, u.proto) })
	}
	for _, tl := range s.tls {
		s.wg.Go(tl.accept)
	}
	return c, nil
}

// Source returns the source to run the pipeline over. The Collector owns
// it: Close closes it.
func (c *Collector) Source() capture.Source { return c.src }

// Addrs returns the address each listener is bound to, in Config order
// (the port the kernel chose for port 0).
func (c *Collector) Addrs() []string { return c.addrs }

// Drain stops receiving and ends the source once what was received is
// decoded: for a stop (SIGTERM) that loses nothing. The UDP sockets take
// no more datagrams (Linux: a socket filter drops every new one) and
// their readers read what the sockets hold without waiting; the TCP
// listeners take no more connections, and the connections are read for
// 100 ms more (a message that is not whole then is counted as Shutdown). Next returns the records of all that, then
// capture.ErrClosed: the pipeline reading the source ends as at the end
// of a file, every window closed. The kernel's drop count is the one of
// the moment Drain was called; Close counts the datagrams the filter
// dropped after (on their way then, or sent later) as Shutdown, and what
// the pipeline did not read by then. Safe to call
// more than once, and from any goroutine.
func (c *Collector) Drain() { c.src.drain() }

// Close closes every socket and listener. What was received and not
// decoded (datagrams a socket held, batches and messages read but not
// yet decoded) is counted in Stats as Datagrams and as the error
// Shutdown: every datagram is decoded, dropped by the kernel (KernelDrops)
// or counted. Safe to call more than once.
func (c *Collector) Close() error { return c.src.Close() }

// ObserverName returns the name of observer id (record.Record.ObserverID):
// Name(address, domain) of an exporter, OtherName, or "" for 0.
func (c *Collector) ObserverName(id uint32) string { return c.reg.name(id) }

// Stats returns the counters since Open. Safe from any goroutine.
func (c *Collector) Stats() Stats {
	st := c.src.stats
	s := Stats{
		Datagrams:        st.datagrams.Load(),
		Records:          st.records.Load(),
		Errors:           make(map[string]uint64, numReasons),
		TemplatesEvicted: st.templatesEvicted.Load(),
		DomainsEvicted:   st.domainsEvicted.Load(),
		ExportersEvicted: st.exportersEvicted.Load(),
		CounterSamples:   st.counterSamples.Load(),
		KernelDrops:      st.kernelDrops.Load(),
		Connections:      st.connections.Load(),
		StartAhead:       st.startAhead.Load(),
		ObserverOverflow: c.reg.overflow.Load(),

		TCPOpen:               uint64(max(0, st.tcpOpen.Load())),
		TCPRefused:            st.tcpRefused.Load(),
		TCPIdleClosed:         st.tcpIdle.Load(),
		TCPStalledClosed:      st.tcpStalled.Load(),
		ObserverShareOverflow: c.reg.shareOverflow.Load(),
		ObserversEvicted:      c.reg.evicted.Load(),
		TemplateMemoryEvicted: c.cfg.Limits.Budget.Evicted(),
		TemplateMemory:        c.cfg.Limits.Budget.Used(),

		TemplatesSessionClosed:  st.templatesClosed.Load(),
		TemplatesSessionEvicted: st.templatesOfEvicted.Load(),
	}
	for i := range st.errors {
		s.Errors[reasons[i]] = st.errors[i].Load()
	}
	for _, o := range c.reg.observers(time.Now().UnixNano()) {
		s.Observers = append(s.Observers, o.stats())
	}
	return s
}
