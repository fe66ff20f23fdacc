package nvmlreceiver

import "flag"

// testParallelism is how many tests run at once by default: most of them
// wait on deadlines (hung mock calls, scrape timeouts, background reads)
// rather than compute, so that running only as many as there are CPUs
// (go test's default) would make the package wait for the sum of their
// deadlines. An explicit -parallel still wins.
const testParallelism = "8"

// waitInParallel is TestMain's setup (metadata.yaml tests::goleak::setup):
// flags are not parsed yet, so a -parallel given to go test overrides it.
func waitInParallel() {
	if f := flag.Lookup("test.parallel"); f != nil {
		_ = f.Value.Set(testParallelism)
	}
}
