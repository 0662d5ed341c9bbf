package affinity

import (
	"runtime"
	"testing"
)

func TestPinToAllowedCPU(t *testing.T) {
	cpus, err := Allowed()
	if err != nil {
		t.Fatal(err)
	}
	if len(cpus) == 0 {
		t.Fatal("no allowed CPU")
	}
	done := make(chan error)
	go func() {
		// The goroutine ends locked, so its thread (with its narrowed
		// mask) exits with it.
		err := Pin(cpus[len(cpus)-1])
		if err == nil {
			var got []int
			got, err = Allowed()
			if err == nil && (len(got) != 1 || got[0] != cpus[len(cpus)-1]) {
				t.Errorf("after Pin(%d): allowed %v", cpus[len(cpus)-1], got)
			}
		}
		done <- err
	}()
	if err := <-done; err != nil {
		if runtime.GOOS != "linux" {
			t.Skipf("Pin: %v", err)
		}
		t.Fatal(err)
	}
}
