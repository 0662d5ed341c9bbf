package pipeline

import (
	"errors"
	"testing"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/sketch"
)

// TestSketchConfig: the sketch seed and precision default to the sketch
// package's, and a precision outside its range is a config error.
func TestSketchConfig(t *testing.T) {
	p, err := New(Config{Workers: 1, Filter: "exact", Key: flow.KeySrc}, &collectSink{})
	if err != nil {
		t.Fatal(err)
	}
	if c := p.Config(); c.SketchSeed != sketch.DefaultSeed || c.SketchPrecision != sketch.DefaultPrecision || c.KeepSketch {
		t.Errorf("defaults: seed %#x, precision %d, keep %v", c.SketchSeed, c.SketchPrecision, c.KeepSketch)
	}
	for _, prec := range []uint8{3, 19, 255} {
		_, err := New(Config{Workers: 1, Filter: "exact", Key: flow.KeySrc, SketchPrecision: prec}, &collectSink{})
		if !errors.Is(err, ErrConfig) || !errors.Is(err, sketch.ErrPrecision) {
			t.Errorf("precision %d: %v, want ErrConfig and sketch.ErrPrecision", prec, err)
		}
	}
	p, err = New(Config{Workers: 1, Filter: "exact", Key: flow.KeySrc, SketchSeed: 5, SketchPrecision: 10, KeepSketch: true}, &collectSink{})
	if err != nil {
		t.Fatal(err)
	}
	if c := p.Config(); c.SketchSeed != 5 || c.SketchPrecision != 10 || !c.KeepSketch {
		t.Errorf("config %+v", c)
	}
}
