package attribution

import (
	"fmt"
	"runtime"
	"testing"

	"k8s.io/client-go/tools/cache"
)

// BenchmarkResourceSliceStore1000 measures what the informer keeps for
// 1,000 ResourceSlices of 8 GPUs each (the store, with its uuid and device
// indexes) as heap bytes, and the lookup a scrape makes per device
// (docs/reference/resources.md).
func BenchmarkResourceSliceStore1000(b *testing.B) {
	w := newSliceWatcher(ResourceSlicesConfig{NodeName: "node1"}, DefaultDRADrivers(), nil)
	build := func() cache.Indexer {
		idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{indexUUID: w.uuidIndex, indexDevice: w.deviceIndex})
		for i := 0; i < 1000; i++ {
			var devs []sliceDevice
			for g := 0; g < 8; g++ {
				devs = append(devs, sliceDevice{fmt.Sprintf("gpu-%d", g), fmt.Sprintf("GPU-%08d-0000-4000-8000-%012d", i, g)})
			}
			if err := idx.Add(slice(fmt.Sprintf("node1-gpus-%d", i), "1", devs...)); err != nil {
				b.Fatal(err)
			}
		}
		return idx
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	idx := build()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		objs, _ := idx.ByIndex(indexUUID, fmt.Sprintf("GPU-%08d-0000-4000-8000-%012d", i%1000, i%8))
		if len(objs) != 1 {
			b.Fatal(len(objs))
		}
	}
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc), "store-heap-bytes")
	runtime.KeepAlive(idx)
}
