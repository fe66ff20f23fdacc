//go:build cgo

package nvmlreceiver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
	"github.com/otelcol-nvml/otelcol-nvml/test/testutil"
)

const fixtureContainer = "1f2e3d4c5b6a79881f2e3d4c5b6a79881f2e3d4c5b6a79881f2e3d4c5b6a7988"

func TestContainerCPUBesideTheGPU(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	// 4242 runs in a pod's container (testdata/proc/4242/cgroup) and uses
	// two GPUs; 4343 is a host process.
	m.GPUs[0].SetProcesses(proc(4242, 8<<30), proc(4343, 1<<30))
	m.GPUs[1].SetProcesses(proc(4242, 2<<30))
	ts := newTestScraper(t, m)
	ts.start(t)
	md := ts.scrapeOK(t)

	ctrs := testutil.ContainerResources(md)
	require.Len(t, ctrs, 1, "one resource per container, however many GPUs it holds; none for host processes")
	c := ctrs[fixtureContainer]
	require.NotNil(t, c)
	assert.Equal(t, "0d3e0c8a-1111-4222-8333-944455556666", c["k8s.pod.uid"])
	assert.InDelta(t, 12.5, c["container.cpu.time"], 1e-9, "cpu.stat usage_usec in seconds")
	assert.Equal(t, true, c["container.cpu.time/monotonic"])
	assert.InDelta(t, 4.0, c["nvidia.gpu.container.cpu.limit"], 1e-9, "cpu.max 400000/100000")
	assert.Zero(t, ts.logs.FilterMessageSnippet("Cannot read the CPU").Len())
}

func TestContainerCPUUnreadableWarnsOnce(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	m.GPUs[0].SetProcesses(proc(4242, 8<<30))
	ts := newTestScraper(t, m, func(cfg *Config) { cfg.Processes.CgroupRoot = t.TempDir() })
	ts.start(t)
	for i := 0; i < 3; i++ {
		md := ts.scrapeOK(t)
		assert.Empty(t, testutil.ContainerResources(md), "no CPU without the cgroup")
		assert.NotEmpty(t, gpuResourceAttrs(md, nvmltest.UUID(0)), "the GPU's metrics go on")
	}
	assert.Equal(t, 1, ts.logs.FilterMessageSnippet("Cannot read the CPU").Len(), "one warning per container")
}

func TestContainerCPUOffWithProcesses(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	m.GPUs[0].SetProcesses(proc(4242, 8<<30))
	ts := newTestScraper(t, m, func(cfg *Config) { cfg.Processes.Enabled = false })
	ts.start(t)
	assert.Empty(t, testutil.ContainerResources(ts.scrapeOK(t)))
}
