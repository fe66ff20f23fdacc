package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// socketDir is a short temporary directory: a unix socket's path has at
// most 108 bytes, which t.TempDir() can exceed.
func socketDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dk")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// serve runs run() on a pods file with validNode until the test ends, and
// returns its socket and a channel with run's result.
func serve(t *testing.T) (string, <-chan error, context.CancelFunc) {
	t.Helper()
	dir := socketDir(t)
	pods := filepath.Join(dir, "pods.json")
	require.NoError(t, os.WriteFile(pods, []byte(validNode), 0o600))
	sock := filepath.Join(dir, "kubelet.sock")
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan *Node, 1)
	done := make(chan error, 1)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		done <- run(ctx, pods, sock, func(n *Node) { ready <- n })
	}()
	t.Cleanup(func() {
		cancel()
		<-finished
	})
	select {
	case n := <-ready:
		require.Len(t, n.Pods, 2)
	case err := <-done:
		t.Fatalf("run: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("not ready after 10 s")
	}
	return sock, done, cancel
}

// client dials the socket as the receiver does (internal/attribution).
func client(t *testing.T, sock string) podresourcesv1.PodResourcesListerClient {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///kubelet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return podresourcesv1.NewPodResourcesListerClient(conn)
}

func TestServe(t *testing.T) {
	sock, done, cancel := serve(t)
	fi, err := os.Stat(sock)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the socket is its owner's only")

	c := client(t, sock)
	ctx, cancelCall := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelCall()

	trainer := &podresourcesv1.PodResources{Namespace: "ml", Name: "train-0", Containers: []*podresourcesv1.ContainerResources{
		{Name: "trainer", Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{gpu0}}}},
		{Name: "logger"},
	}}
	llm := &podresourcesv1.PodResources{Namespace: "serve", Name: "llm-0", Containers: []*podresourcesv1.ContainerResources{
		{Name: "server", Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/mig-1g.18gb", DeviceIds: []string{mig0}}}},
	}}

	list, err := c.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	require.NoError(t, err)
	assert.True(t, proto.Equal(&podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{trainer, llm}}, list), "List: %v", list)

	got, err := c.Get(ctx, &podresourcesv1.GetPodResourcesRequest{PodName: "llm-0", PodNamespace: "serve"})
	require.NoError(t, err)
	assert.True(t, proto.Equal(llm, got.GetPodResources()), "Get: %v", got)
	_, err = c.Get(ctx, &podresourcesv1.GetPodResourcesRequest{PodName: "llm-0", PodNamespace: "ml"})
	assert.Equal(t, codes.NotFound, status.Code(err), "Get of a pod in another namespace: %v", err)

	alloc, err := c.GetAllocatableResources(ctx, &podresourcesv1.AllocatableResourcesRequest{})
	require.NoError(t, err)
	assert.True(t, proto.Equal(&podresourcesv1.AllocatableResourcesResponse{Devices: []*podresourcesv1.ContainerDevices{
		{ResourceName: "nvidia.com/gpu", DeviceIds: []string{gpu0, gpu1}},
		{ResourceName: "nvidia.com/mig-1g.18gb", DeviceIds: []string{mig0}},
	}}, alloc), "GetAllocatableResources: %v", alloc)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
	_, err = os.Lstat(sock)
	assert.True(t, os.IsNotExist(err), "the socket is removed on exit: %v", err)
}

// TestServerIsolation: a caller's change to an answer (in process) does not
// reach the node, nor the next answer.
func TestServerIsolation(t *testing.T) {
	n, err := ParseNode(strings.NewReader(validNode))
	require.NoError(t, err)
	s := newServer(n)
	resp, err := s.List(context.Background(), &podresourcesv1.ListPodResourcesRequest{})
	require.NoError(t, err)
	resp.PodResources[0].Containers[0].Devices[0].DeviceIds[0] = "changed"
	assert.Equal(t, gpu0, n.Pods[0].Containers[0].Devices[0].IDs[0], "an answer shares nothing with the node")
}

func TestRunErrors(t *testing.T) {
	dir := socketDir(t)
	pods := filepath.Join(dir, "pods.json")
	require.NoError(t, os.WriteFile(pods, []byte(validNode), 0o600))
	never := func(*Node) { t.Error("ready called") }

	err := run(context.Background(), filepath.Join(dir, "missing.json"), filepath.Join(dir, "a.sock"), never)
	require.Error(t, err)
	assert.True(t, os.IsNotExist(err), "%v", err)

	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"pods": [{"name": "p"}]}`), 0o600))
	err = run(context.Background(), bad, filepath.Join(dir, "a.sock"), never)
	require.ErrorContains(t, err, "bad.json: pods[0]: namespace and name are required")

	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	err = run(context.Background(), pods, file, never)
	require.ErrorContains(t, err, "exists and is not a socket")
	_, err = os.Stat(file)
	assert.NoError(t, err, "a file that is not a socket is left alone")
}

func TestStaleSocket(t *testing.T) {
	dir := socketDir(t)
	sock := filepath.Join(dir, "kubelet.sock")

	// Left by an earlier run: bound, no longer listened on.
	lis, err := net.Listen("unix", sock)
	require.NoError(t, err)
	lis.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, lis.Close())
	require.NoError(t, removeStaleSocket(sock))
	_, err = os.Lstat(sock)
	assert.True(t, os.IsNotExist(err), "a stale socket is removed: %v", err)

	// Still served: left alone.
	lis, err = net.Listen("unix", sock)
	require.NoError(t, err)
	defer lis.Close()
	require.ErrorContains(t, removeStaleSocket(sock), "in use")
	_, err = os.Lstat(sock)
	assert.NoError(t, err)

	require.NoError(t, removeStaleSocket(filepath.Join(dir, "none.sock")), "nothing there")
}

// A container's DRA claims are served as its dynamic_resources, in the
// pod's namespace, with a share_id where the file gives one.
func TestServeClaims(t *testing.T) {
	n, err := ParseNode(strings.NewReader(`{"pods": [{"namespace": "ml", "name": "notebook-0", "containers": [
		{"name": "jupyter", "devices": [], "claims": [{"name": "notebook-gpu", "devices": [
			{"driver": "gpu.nvidia.com", "pool": "node1", "device": "gpu-2"},
			{"driver": "gpu.nvidia.com", "pool": "node1", "device": "gpu-3", "share_id": "a1"}]}]}]}],
		"allocatable": []}`))
	require.NoError(t, err)
	resp, err := newServer(n).List(context.Background(), &podresourcesv1.ListPodResourcesRequest{})
	require.NoError(t, err)
	drs := resp.GetPodResources()[0].GetContainers()[0].GetDynamicResources()
	require.Len(t, drs, 1)
	assert.Equal(t, "notebook-gpu", drs[0].GetClaimName())
	assert.Equal(t, "ml", drs[0].GetClaimNamespace())
	res := drs[0].GetClaimResources()
	require.Len(t, res, 2)
	assert.Equal(t, "gpu-2", res[0].GetDeviceName())
	assert.Equal(t, "node1", res[0].GetPoolName())
	assert.Equal(t, "gpu.nvidia.com", res[0].GetDriverName())
	assert.Nil(t, res[0].ShareId)
	assert.Equal(t, "a1", res[1].GetShareId())

	_, err = ParseNode(strings.NewReader(`{"pods": [{"namespace": "ml", "name": "p", "containers": [
		{"name": "c", "devices": [], "claims": [{"name": "x", "devices": [{"driver": "gpu.nvidia.com", "device": "gpu-2"}]}]}]}], "allocatable": []}`))
	assert.ErrorContains(t, err, "container c claims[0] devices[0]: driver, pool and device are required")
}
