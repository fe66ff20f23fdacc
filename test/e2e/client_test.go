//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
	"github.com/otelcol-nvml/otelcol-nvml/test/testutil"
)

// These tests run internal/nvmlclient on the fake library in the test
// process, through go-nvml's real cgo path (the mocks bypass it): what
// issue 9 found there, each failing before its fix.

func TestClientOnFakeLibrary(t *testing.T) {
	t.Parallel()
	t.Run("GrowingProcessListIsBounded", testGrowingProcessList)
	t.Run("TooManyProcessesAreDropped", testTooManyProcesses)
	t.Run("ProcessUtilizationGrowingBetweenCalls", testProcessUtilizationGrows)
	t.Run("LibraryThatIsNotNVML", testNotNVML)
	t.Run("MissingLibrary", testMissingLibrary)
}

func openClient(t *testing.T, s Scenario) (*nvmlclient.Client, *observer.ObservedLogs) {
	t.Helper()
	useScenario(t, s.write(t))
	core, logs := observer.New(zapcore.DebugLevel)
	c := nvmlclient.NewSystem(testutil.AbsFlag(t, "fakenvml", *fakeNVMLPath), zap.New(core), nvmlclient.WithProcesses(true),
		nvmlclient.WithReads(nvmlclient.GetterOf(nvml.Device.GetTemperature, nvml.TEMPERATURE_GPU, "GPU")))
	require.NoError(t, c.Open(nil))
	c.PrimeAll()
	t.Cleanup(func() { assert.NoError(t, c.Close(context.Background())) })
	return c, logs
}

func processList(n int) []Process {
	out := make([]Process, n)
	for i := range out {
		out[i] = Process{PID: uint32(1000 + i), UsedMemoryBytes: 1 << 20, SMPercent: 10}
	}
	return out
}

// Issue 9, defect 5: NVML answering INSUFFICIENT_SIZE with a growing count
// (the fake now writes the count back, as NVML does) made go-nvml's
// doubling loop allocate without bound (9.9 GB in the soak).
func testGrowingProcessList(t *testing.T) {
	c, _ := openClient(t, Scenario{GPUs: []GPU{{
		UUID:      "GPU-9f000000-0000-4000-8000-000000000005",
		Processes: processList(3),
		Errors:    []Fault{{Call: "nvmlDeviceGetComputeRunningProcesses", Return: "INSUFFICIENT_SIZE"}},
	}}})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	began := time.Now()
	_, err := c.Devices()[0].Read()
	runtime.ReadMemStats(&after)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "nvmlDeviceGetComputeRunningProcesses")
	assert.Contains(t, err.Error(), "Insufficient")
	assert.Less(t, time.Since(began), time.Second)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(16<<20), "the buffer is bounded")
}

// Issue 9, defect 5: past MaxProcessesPerGPU the list is dropped, in one
// log line, and the GPU's other metrics stay.
func testTooManyProcesses(t *testing.T) {
	c, logs := openClient(t, Scenario{GPUs: []GPU{{
		UUID:         "GPU-9f000000-0000-4000-8000-000000000006",
		TemperatureC: 40,
		Processes:    processList(sample.MaxProcessesPerGPU + 1),
	}}})
	for range 2 {
		s, err := c.Devices()[0].Read()
		require.NoError(t, err)
		assert.False(t, s.ProcessesListed)
		assert.Empty(t, s.Processes)
		assert.Equal(t, 40.0, s.Values[0].Value, "the temperature")
	}
	assert.Equal(t, 1, logs.FilterMessageSnippet("More processes on this GPU than the receiver lists").Len())
}

// Issue 9, defect 9, the real cause of the recovered panics: go-nvml's
// GetProcessUtilization asks for the count, allocates it, asks again and
// re-slices to the count NVML wrote back, which is larger when samples
// arrived in between: "slice bounds out of range [:2] with capacity 1".
// The client calls it with a buffer it checks.
func testProcessUtilizationGrows(t *testing.T) {
	s := Scenario{GPUs: []GPU{{
		UUID:      "GPU-9f000000-0000-4000-8000-000000000009",
		Processes: processList(2),
		Errors:    []Fault{{Call: "nvmlDeviceGetProcessUtilization", Return: "INSUFFICIENT_SIZE"}},
	}}}
	c, logs := openClient(t, s)

	// go-nvml itself panics.
	lib := newLib(t)
	require.Equal(t, nvml.SUCCESS, lib.Init())
	defer lib.Shutdown()
	panicked := func() (p any) {
		defer func() { p = recover() }()
		_, _ = device(t, lib, 0).GetProcessUtilization(0)
		return nil
	}()
	require.NotNil(t, panicked, "go-nvml re-slices past its buffer")
	assert.Contains(t, fmt.Sprint(panicked), "slice bounds out of range")

	d := c.Devices()[0]
	_, err := d.Read()
	require.Error(t, err, "the utilization that kept growing is a failed call for this scrape")
	assert.NotContains(t, err.Error(), "panic")
	assert.Contains(t, err.Error(), "nvmlDeviceGetProcessUtilization")
	assert.Zero(t, logs.FilterMessageSnippet("Recovered a panic").Len(), "no panic to recover")
}

// libcPath finds the C library this test process runs on: a library that
// exists everywhere and is not NVML.
func libcPath(t *testing.T) string {
	f, err := os.Open("/proc/self/maps")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if p := fields[len(fields)-1]; strings.Contains(p, "/libc.so") || strings.Contains(p, "/libc-") {
			return p
		}
	}
	t.Skip("no libc in /proc/self/maps")
	return ""
}

// Issue 9, defect 7: a library_path that is not NVML killed the process
// (exit 127: go-nvml called nvmlInit, an unresolved symbol). It is refused
// with an error naming the file.
func testNotNVML(t *testing.T) {
	path := libcPath(t)
	c := nvmlclient.NewSystem(path, zap.NewNop())
	err := c.Open(nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), path+" is not an NVML library")
	assert.Contains(t, err.Error(), "nvmlInit_v2")
	assert.Contains(t, err.Error(), "library_path")
}

// Issue 9, defect 7: a missing library is named, with dlopen's reason.
func testMissingLibrary(t *testing.T) {
	path := t.TempDir() + "/libnvidia-ml.so.1"
	err := nvmlclient.NewSystem(path, zap.NewNop()).Open(nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cannot load "+path)
	assert.Contains(t, err.Error(), "No such file or directory")
}
