//go:build linux && !(mips || mips64 || ppc64 || s390x)

package cli

import (
	"errors"

	"github.com/spf13/pflag"

	"github.com/flowdedup/flowdedup/capture/afxdp"
	"github.com/flowdedup/flowdedup/capture/xdp"
)

// afxdpFlags are the flags of --mode afxdp.
type afxdpFlags struct {
	queues string
	mode   afxdp.BindMode
	frames int
	// prefilter: --afxdp-prefilter, the in-kernel prefilter (one
	// window, no --decap, no --prefix).
	prefilter bool
}

func (a *afxdpFlags) bind(fs *pflag.FlagSet) {
	a.mode = afxdp.BindAuto
	fs.StringVar(&a.queues, "afxdp-queues", "", "receive `QUEUES` to capture with --mode afxdp, e.g. 0,2,4-7 (default: all); frames of other queues reach the kernel stack")
	fs.Var(typed{&a.mode, "MODE"}, "afxdp-bind", "AF_XDP socket mode: auto (zero-copy where the driver has it, else copy) | copy | zerocopy")
	fs.IntVar(&a.frames, "afxdp-frames", afxdp.DefaultNumFrames, "UMEM frames (and ring entries) per queue, a power of two")
	fs.BoolVar(&a.prefilter, "afxdp-prefilter", false, "key frames in the kernel too, and keep frames whose key was already handed on from crossing to user space (counted as prefiltered, as with --mode xdp); needs one window (no --window), and no --decap or --prefix")
}

// openAFXDP opens the AF_XDP sockets of --mode afxdp; cfg gives the key
// of --afxdp-prefilter.
func openAFXDP(cfg *CaptureConfig, live liveFlags, xf xdpFlags, af afxdpFlags) (*afxdp.Capture, error) {
	queues, err := afxdp.ParseQueues(af.queues)
	if err != nil {
		return nil, usageError{err}
	}
	var pf *afxdp.Prefilter
	if af.prefilter {
		switch {
		case cfg.Window > 0:
			return nil, usageError{errors.New("--afxdp-prefilter needs one window: it is never emptied (drop --window)")}
		case cfg.Decap.Tunnels != 0:
			return nil, usageError{errors.New("--afxdp-prefilter does not decapsulate: drop --decap, or use --mode xdp")}
		case !cfg.Prefix.IsZero():
			return nil, usageError{errors.New("--afxdp-prefilter does not key by network: drop --prefix, or use --mode xdp")}
		}
		pf = &afxdp.Prefilter{Kind: cfg.Key, Seed: xdp.PrefilterSeed(cfg.Seed.v)}
	}
	return afxdp.Open(afxdp.Config{
		Iface: live.iface, Queues: queues, Attach: xf.attach, Bind: af.mode,
		NumFrames: af.frames, PollTimeout: live.pollTimeout, Prefilter: pf,
	})
}
