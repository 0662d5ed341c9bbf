package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/flowdedup/flowdedup/collect"
	"github.com/flowdedup/flowdedup/collect/netflow"
	"github.com/flowdedup/flowdedup/record"
	"github.com/flowdedup/flowdedup/units"
)

// CollectConfig holds the flags of `flowdedup collect`.
type CollectConfig struct {
	CaptureConfig
	Listen  []string      // --listen URL, repeatable
	Allow   []string      // --allow CIDR, repeatable
	Rcvbuf  int64         // --rcvbuf, bytes
	Sockets int           // --sockets per UDP listener; 0: --workers
	TCPIdle time.Duration // --tcp-idle-timeout
	// Hostile networks.
	TemplateMemory int64         // --template-memory, bytes
	MaxClockAhead  time.Duration // --max-clock-ahead

	listeners []collect.Listener
	allow     []netip.Prefix
}

// newCollectConfig returns collect's defaults: as run's (a daemon's
// summaries go to stderr unless sent elsewhere), and a lateness of one
// window, since a router exports a flow when it ends or at its active
// timeout, minutes after it began.
func newCollectConfig() CollectConfig {
	c := CollectConfig{CaptureConfig: newCaptureConfig(), Rcvbuf: collect.DefaultRcvbuf, TCPIdle: collect.DefaultTCPIdleTimeout,
		TemplateMemory: netflow.DefaultTemplateMemory, MaxClockAhead: collect.DefaultMaxClockAhead}
	c.Summary = "-"
	c.lateDefault = math.MaxInt64 // capped at one window
	return c
}

// BindFlags registers collect's flags on fs.
func (c *CollectConfig) BindFlags(fs *pflag.FlagSet) {
	fs.StringArrayVar(&c.Listen, "listen", nil, "receive flow records on `URL` (repeatable): netflow://HOST:PORT (NetFlow v5, v9 and IPFIX over UDP, e.g. netflow://0.0.0.0:2055), ipfix+tcp://HOST:PORT (IPFIX over TCP, e.g. from 'flowdedup run --export ipfix+tcp://'), sflow://HOST:PORT (sFlow v5, e.g. sflow://0.0.0.0:6343)")
	fs.StringArrayVar(&c.Allow, "allow", nil, "take datagrams and connections only from exporters in `CIDR` (repeatable), e.g. --allow 10.0.0.0/8; others are counted as rejected_exporter and dropped")
	fs.Var(sizeValue{p: &c.Rcvbuf}, "rcvbuf", "receive buffer `SIZE` of each UDP socket, e.g. 64MiB: forced with CAP_NET_ADMIN, else at most net.core.rmem_max (a warning says so); a burst that does not fit is dropped by the kernel and counted (dropped_by kernel)")
	fs.IntVar(&c.Sockets, "sockets", 1, "UDP sockets per listener, each read by a goroutine of its own (SO_REUSEPORT: the kernel sends each exporter to one of them); their records are keyed by one goroutine")
	fs.Var(durationValue{p: &c.TCPIdle}, "tcp-idle-timeout", "close an IPFIX-over-TCP connection on which no message began for `D` (counted: flowdedup_collect_connections_closed_total{reason=\"idle\"}); a message that began must be whole within 30 s (reason stalled)")
	fs.Var(sizeValue{p: &c.TemplateMemory}, "template-memory", "bound the NetFlow v9 and IPFIX templates of every exporter and TCP connection together to `SIZE`, e.g. 64MiB; past it the templates least in use are evicted (counted: evicted template_memory) and learnt again from the exporter's next refresh; a TCP connection's templates are freed when it closes (counted: templates_released session_closed)")
	fs.Var(durationValue{p: &c.MaxClockAhead}, "max-clock-ahead", "a flow record that starts more than `D` after it arrived (an exporter's clock is fast) takes its arrival as its time, counted as start_ahead, so that one wrong clock does not close the windows of the others")
	c.CaptureConfig.BindFlags(fs)
	fs.TextVar(&c.Decap, "decap", c.Decap, decapUsage+"; sFlow flow samples' raw packet headers only: NetFlow and IPFIX records name their fields and carry no packet, and are keyed as they come")
	if f := fs.Lookup("lateness"); f != nil {
		f.Usage = "allowed lateness `D`: a window closes when the newest record's flow start passes its end plus D; records that began earlier are counted as late. Routers export a flow when it ends or at its active timeout: set D to that timeout, at least (default: one --window). Each worker keeps ceil(D/window)+1 filters"
	}
}

const collectLong = `Receives the flow records routers export (NetFlow v5, v9, IPFIX, sFlow) and writes
each flow key the first time an exporter reports it in a window, with the same
filters, windows, outputs and exports as replay and run. A daemon: stop it with
Ctrl-C (SIGINT) or SIGTERM, and the last window is closed and written.

Each exporter's observation domain (its address and NetFlow v9 source ID, IPFIX
observation domain, v5 engine, or sFlow agent and sub-agent) is an observer: keys
are deduplicated per exporter, so a key two routers saw is a record of each, and
records carry it ("exporter":"192.0.2.1#0"; the observer column of ClickHouse's
flows table). --observer names the collector itself, in the summaries.

A flow record's window is its flow start (NetFlow v5 and v9: from the exporter's
uptime and clock; IPFIX: its absolute times); sFlow samples carry no time and take
their arrival. sFlow samples' packet headers are keyed as replay keys frames, with
--decap by the innermost IP header through the tunnels listed (GRE, ERSPAN, VXLAN,
Geneve, GTP-U, IP-in-IP: a mirror session or an overlay an agent samples); NetFlow
and IPFIX records carry no packet, only fields, and --decap does not change them.
Headers the parser cannot key (cut by the agent's header size inside a tunnel,
say) are counted by reason as in replay (malformed_by, skipped_by). In the
summaries, packets counts records (flow records and sFlow samples), and collect
adds what it counted since the previous summary: datagrams, records and decode
errors by reason, and per exporter its datagrams, records, distinct keys of the
window, loss in transit from its sequence numbers, and its sampling rate (counts of
sampled traffic are lower bounds). Datagrams the kernel dropped for want of buffer
are counted as dropped_by kernel.`

const collectExamples = `  flowdedup collect --listen netflow://0.0.0.0:2055 --key src --window 1h
  softflowd -r capture.pcap -n 127.0.0.1:2055 -v 10     # then, in another shell:
  flowdedup collect --listen netflow://127.0.0.1:2055 --key src --window 1h --out sources.jsonl
  flowdedup collect --listen sflow://0.0.0.0:6343 --key pair --window 5m --summary summaries.jsonl
  flowdedup collect --listen sflow://0.0.0.0:6343 --decap vxlan,gtpu --key src --window 1h   # hosts inside the tunnels sampled
  flowdedup collect --listen netflow://0.0.0.0:2055 --listen sflow://0.0.0.0:6343 --allow 10.0.0.0/8 \
      --window 1h --export clickhouse://127.0.0.1:8123/flows --spool /var/spool/flowdedup --observer collector1
  flowdedup collect --listen ipfix+tcp://0.0.0.0:4739 --window 1m --summary-sketch --out /dev/null --metrics 127.0.0.1:9100
`

func collectCommand() command {
	return command{
		use:     "collect --listen URL [--listen URL...] [flags]",
		short:   "flow records routers export (NetFlow, IPFIX, sFlow) -> distinct flows per exporter and window summaries",
		long:    collectLong + "\n\n" + outputHelp,
		example: collectExamples,
		bind: func(cmd *cobra.Command) runFunc {
			cfg := newCollectConfig()
			cfg.BindFlags(cmd.Flags())
			completeCaptureFlags(cmd)
			noArgs(cmd)
			return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
				return runCollect(ctx, &cfg, args, stdout, stderr)
			}
		},
	}
}

// check validates collect's own flags, then the shared ones.
func (c *CollectConfig) check(budget memoryBudget) error {
	if len(c.Listen) == 0 {
		return usagef("--listen is required, e.g. --listen netflow://0.0.0.0:2055")
	}
	c.listeners = c.listeners[:0]
	for _, u := range c.Listen {
		l, err := collect.ParseListener(u)
		if err != nil {
			return usageError{err}
		}
		c.listeners = append(c.listeners, l)
	}
	c.allow = c.allow[:0]
	for _, a := range c.Allow {
		p, err := netip.ParsePrefix(a)
		if err != nil {
			addr, aerr := netip.ParseAddr(a)
			if aerr != nil {
				return usagef("--allow %q: want a CIDR such as 10.0.0.0/8 or 2001:db8::/32", a)
			}
			p = netip.PrefixFrom(addr, addr.BitLen())
		}
		c.allow = append(c.allow, p.Masked())
	}
	if c.Rcvbuf > 1<<31-1 {
		return usagef("--rcvbuf %s: at most 2GiB", units.FormatBytes(c.Rcvbuf))
	}
	if c.Sockets < 1 {
		return usagef("--sockets must be at least 1")
	}
	if c.TCPIdle <= 0 {
		return usagef("--tcp-idle-timeout must be positive, e.g. 5m")
	}
	if c.TemplateMemory < 64<<10 {
		return usagef("--template-memory %s: at least 64KiB", units.FormatBytes(c.TemplateMemory))
	}
	if c.MaxClockAhead <= 0 {
		return usagef("--max-clock-ahead must be more than 0, e.g. 5s")
	}
	return c.CaptureConfig.check(budget)
}

// runCollect collects as cfg says until ctx is cancelled.
func runCollect(ctx context.Context, cfg *CollectConfig, args []string, stdout, stderr io.Writer) error {
	catchHangup()
	if len(args) > 0 {
		return usagef("unexpected argument %q: collect takes no files; give --listen URL", args[0])
	}
	if err := cfg.check(systemMemory()); err != nil {
		return err
	}
	sockets := cfg.Sockets
	c, err := collect.Open(collect.Config{
		Listeners: cfg.listeners, Allow: cfg.allow, Key: cfg.Key,
		Sockets: sockets, Rcvbuf: int(cfg.Rcvbuf), Warnings: stderr, TCPIdleTimeout: cfg.TCPIdle,
		TemplateMemory: cfg.TemplateMemory, MaxClockAhead: cfg.MaxClockAhead,
	})
	if err != nil {
		return err
	}
	defer c.Close()
	counts := newCollectCounts(c)
	s, err := openSession(ctx, &cfg.CaptureConfig, sessionMode{
		name: "collect", live: true, wait: true, idleWallClock: true, observers: c, annotate: counts.annotate, metrics: []prometheus.Collector{c.Metrics()},
	}, stdout, stderr)
	if err != nil {
		return err
	}
	var where []string
	for i, a := range c.Addrs() {
		where = append(where, cfg.listeners[i].Protocol.String()+"://"+a)
	}
	fmt.Fprintf(stderr, "flowdedup collect: listening on %s (%d sockets per UDP listener), %s\n", strings.Join(where, ", "), sockets, cfg.describe())
	// SIGINT or SIGTERM drains the collector (its source ends once what it
	// received is decoded) rather than stopping the pipeline, which would
	// stop reading it within 500 ms; the pipeline is stopped only if the
	// drain takes longer than collectDrainLimit. Close counts what was not
	// decoded (shutdown) before the totals.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	defer context.AfterFunc(ctx, func() { c.Drain(); time.AfterFunc(collectDrainLimit, cancel) })()
	err = s.run(runCtx, c.Source())
	c.Close()
	fmt.Fprint(stderr, collectTotals(c.Stats()))
	return err
}

// collectDrainLimit bounds the drain of collect at a stop.
const collectDrainLimit = 10 * time.Second

// collectCounts makes the collect part of each summary: what the
// collector counted since the previous one.
// The Reporter calls annotate from its one goroutine.
type collectCounts struct {
	c    *collect.Collector
	prev collect.Stats
	byID map[uint32]collect.ObserverStats
}

func newCollectCounts(c *collect.Collector) *collectCounts {
	return &collectCounts{c: c, byID: map[uint32]collect.ObserverStats{}}
}

// annotate sets s.Collect to the counts since the previous summary.
func (cc *collectCounts) annotate(s *record.Summary) {
	now := cc.c.Stats()
	cur := &record.CollectCounts{
		Datagrams:  now.Datagrams - cc.prev.Datagrams,
		Records:    now.Records - cc.prev.Records,
		StartAhead: now.StartAhead - cc.prev.StartAhead,
		Errors:     map[string]uint64{},
		Exporters:  []record.ExporterCounts{}, // [] rather than null in a quiet window
	}
	for r, n := range now.Errors {
		if d := n - cc.prev.Errors[r]; d != 0 {
			cur.Errors[r] = d
		}
	}
	for _, o := range now.Observers {
		p := cc.byID[o.ID]
		if o.Datagrams == p.Datagrams {
			continue // nothing since the previous summary; the Reporter adds it if it has records of the window
		}
		cur.Exporters = append(cur.Exporters, record.ExporterCounts{
			ID: o.ID, Exporter: o.Name, Protocol: o.Protocol,
			Datagrams: o.Datagrams - p.Datagrams, Records: o.Records - p.Records,
			Lost: o.Lost - p.Lost, LostUnit: o.LostUnit, SamplingRate: o.SamplingRate,
		})
		cc.byID[o.ID] = o
	}
	cc.prev = now
	s.Collect = cur
}

// collectTotals is the line of the collector's totals at the end:
//
//	collect: datagrams 120, records 3500, errors 2 (no_template 2), exporters 3, kernel drops 0
func collectTotals(s collect.Stats) string {
	var b strings.Builder
	var errs uint64
	for _, n := range s.Errors {
		errs += n
	}
	fmt.Fprintf(&b, "collect: datagrams %d, records %d, errors %d", s.Datagrams, s.Records, errs)
	sep := " ("
	for _, r := range slices.Sorted(maps.Keys(s.Errors)) {
		if s.Errors[r] != 0 {
			fmt.Fprintf(&b, "%s%s %d", sep, r, s.Errors[r])
			sep = ", "
		}
	}
	if sep != " (" {
		b.WriteByte(')')
	}
	exporters := 0
	for _, o := range s.Observers {
		if o.Datagrams != 0 {
			exporters++
		}
	}
	fmt.Fprintf(&b, ", exporters %d, kernel drops %d", exporters, s.KernelDrops)
	if s.StartAhead != 0 {
		fmt.Fprintf(&b, ", %d records starting after they came (their arrival taken)", s.StartAhead)
	}
	b.WriteByte('\n')
	return b.String()
}
