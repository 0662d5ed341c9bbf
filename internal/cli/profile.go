package cli

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"

	"github.com/spf13/pflag"
)

// ProfileConfig holds the profiling flags of replay and run: Go's pprof
// profiles of the whole process, for `go tool pprof`.
type ProfileConfig struct {
	CPUProfile string // --cpuprofile FILE
	MemProfile string // --memprofile FILE
}

// BindFlags registers the profiling flags on fs.
func (c *ProfileConfig) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.CPUProfile, "cpuprofile", c.CPUProfile, "write a CPU profile of the run to `FILE`, for 'go tool pprof' (e.g. go tool pprof -top FILE)")
	fs.StringVar(&c.MemProfile, "memprofile", c.MemProfile, "write a memory profile to `FILE` at the end of the run, for 'go tool pprof': what was allocated (-sample_index=alloc_space) and what is still held, sampled every 512 KiB allocated on average")
}

// start starts what c asks for. The returned stop ends the CPU profile and
// writes the memory profile; call it once, when the work to profile is
// done. Both files are created here, so a path that cannot be written is
// an error before any work is done rather than after it.
func (c *ProfileConfig) start() (stop func() error, err error) {
	var cpu, mem *os.File
	if c.MemProfile != "" {
		if mem, err = os.Create(c.MemProfile); err != nil {
			return nil, fmt.Errorf("--memprofile: %w", err)
		}
	}
	if c.CPUProfile != "" {
		if cpu, err = os.Create(c.CPUProfile); err != nil {
			closeFiles(mem)
			return nil, fmt.Errorf("--cpuprofile: %w", err)
		}
		if err = pprof.StartCPUProfile(cpu); err != nil {
			closeFiles(cpu, mem)
			return nil, fmt.Errorf("--cpuprofile: %w", err)
		}
	}
	return func() error {
		var errs []error
		if cpu != nil {
			pprof.StopCPUProfile()
			if err := cpu.Close(); err != nil {
				errs = append(errs, fmt.Errorf("--cpuprofile: %w", err))
			}
		}
		if mem != nil {
			runtime.GC() // the in-use figures of the end of the run, as go test -memprofile has them
			err := pprof.Lookup("heap").WriteTo(mem, 0)
			if cerr := mem.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("--memprofile: %w", err))
			}
		}
		return errors.Join(errs...)
	}, nil
}

func closeFiles(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}
