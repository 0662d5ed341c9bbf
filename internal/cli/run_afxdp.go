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
	// prefilter: --afxdp-prefilter, the in-kernel prefilter (no
	// --decap, no --prefix). On by default: the default turns itself off
	// where the run needs what the prefilter does not do, and
	// prefilterSet (the flag was given) makes that a usage error instead.
	prefilter    bool
	prefilterSet bool
}

func (a *afxdpFlags) bind(fs *pflag.FlagSet) {
	a.mode = afxdp.BindAuto
	fs.StringVar(&a.queues, "afxdp-queues", "", "receive `QUEUES` to capture with --mode afxdp, e.g. 0,2,4-7 (default: all); frames of other queues reach the kernel stack")
	fs.Var(typed{&a.mode, "MODE"}, "afxdp-bind", "AF_XDP socket mode: auto (zero-copy where the driver has it, else copy) | copy | zerocopy")
	fs.IntVar(&a.frames, "afxdp-frames", afxdp.DefaultNumFrames, "UMEM frames (and ring entries) per queue, a power of two")
	fs.BoolVar(&a.prefilter, "afxdp-prefilter", true, "key frames in the kernel too, and keep frames whose key was already handed on in their window from crossing to user space (counted as prefiltered, as with --mode xdp); on unless --decap or --prefix is given; =false: every frame crosses")
}

// openAFXDP opens the AF_XDP sockets of --mode afxdp; cfg gives the key
// and window of the prefilter (--afxdp-prefilter).
func openAFXDP(cfg *CaptureConfig, live liveFlags, xf xdpFlags, af afxdpFlags) (*afxdp.Capture, error) {
	queues, err := afxdp.ParseQueues(af.queues)
	if err != nil {
		return nil, usageError{err}
	}
	pf, err := afxdpPrefilter(cfg, af)
	if err != nil {
		return nil, err
	}
	return afxdp.Open(afxdp.Config{
		Iface: live.iface, Queues: queues, Attach: xf.attach, Bind: af.mode,
		NumFrames: af.frames, PollTimeout: live.pollTimeout, Prefilter: pf,
	})
}

// afxdpPrefilter returns the prefilter of --mode afxdp: the run's key and
// window, unless --afxdp-prefilter=false, or the run needs what it does not
// do (--decap, --prefix), which is a usage error when --afxdp-prefilter was
// given and turns the default off otherwise (nil: every frame crosses).
func afxdpPrefilter(cfg *CaptureConfig, af afxdpFlags) (*afxdp.Prefilter, error) {
	if !af.prefilter {
		return nil, nil
	}
	var unsupported error
	switch {
	case cfg.Decap.Tunnels != 0:
		unsupported = errors.New("--afxdp-prefilter does not decapsulate: drop --decap, or use --mode xdp")
	case !cfg.Prefix.IsZero():
		unsupported = errors.New("--afxdp-prefilter does not key by network: drop --prefix, or use --mode xdp")
	}
	switch {
	case unsupported == nil:
		return &afxdp.Prefilter{Kind: cfg.Key, Seed: xdp.PrefilterSeed(cfg.Seed.v), Window: cfg.Window}, nil
	case af.prefilterSet:
		return nil, usageError{unsupported}
	}
	return nil, nil // the default gives way
}
