package tune_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/tune"
)

// What `flowdedup tune --sample capture.pcap --key 5tuple --window 1m
// --mem 64KiB --objective 'min-fnr:fpr<=0.01'` does. The pick depends on
// the sample, so this example prints no fixed output.
func ExampleRun() {
	obj, err := tune.ParseObjective("min-fnr:fpr<=0.01")
	if err != nil {
		log.Fatal(err)
	}
	res, err := tune.Run(context.Background(), tune.Config{
		Samples:   []string{"../testdata/pcaps/zipf.pcap.gz"},
		Key:       flow.Key5Tuple,
		Window:    time.Minute,
		Mem:       "64KiB",
		Objective: obj,
	})
	if err != nil {
		log.Fatal(err)
	}
	best, ok := res.Best()
	if !ok {
		fmt.Println("no filter meets the bound; the closest is", best.Spec)
	}
	fmt.Println("--filter", best.Spec)
	res.WriteText(os.Stdout)
}
