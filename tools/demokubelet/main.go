// Command demokubelet is make demo's simulated kubelet: it serves the
// kubelet's PodResources v1 gRPC API (List, Get, GetAllocatableResources)
// on a unix socket, with the pods, containers and devices of a pods file
// (testdata/demo/pods.json), so that the receiver's pod attribution works on
// the SIMULATED GPUs without Kubernetes. It is a demo and test tool: no
// kubelet, no device plugin, nothing is allocated.
//
//	demokubelet -pods testdata/demo/pods.json -socket DIR/kubelet.sock
//
// It serves until SIGINT or SIGTERM, then removes its socket. A stale socket
// left at the path is replaced; a socket in use, or any other file there, is
// an error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/grpc"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

func main() {
	pods := flag.String("pods", "", "the pods file (JSON, see testdata/demo/pods.json)")
	socket := flag.String("socket", "", "the unix socket to serve the PodResources API on")
	flag.Parse()
	if *pods == "" || *socket == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: demokubelet -pods FILE -socket PATH")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err := run(ctx, *pods, *socket, func(n *Node) {
		fmt.Fprintf(os.Stderr, "demokubelet: SIMULATED kubelet PodResources API on %s: %d pods (%s)\n", *socket, len(n.Pods), *pods)
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "demokubelet:", err)
		os.Exit(1)
	}
}

// run serves the pods file's node on socket until ctx ends; ready is called
// once the socket accepts connections.
func run(ctx context.Context, podsPath, socket string, ready func(*Node)) error {
	f, err := os.Open(podsPath)
	if err != nil {
		return err
	}
	n, err := ParseNode(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", podsPath, err)
	}
	if err := removeStaleSocket(socket); err != nil {
		return err
	}
	lis, err := net.Listen("unix", socket)
	if err != nil {
		return err
	}
	// As the kubelet's: for its owner only.
	if err := os.Chmod(socket, 0o600); err != nil {
		lis.Close()
		return err
	}
	srv := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(srv, newServer(n))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	ready(n)
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(2 * time.Second):
		srv.Stop()
	}
	// Serve closed the listener, which removed the socket.
	return nil
}

// removeStaleSocket removes a socket left at path by an earlier run; a
// missing path is fine. Anything that is not a socket, and a socket that
// something still serves, is an error.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.Mode()&fs.ModeSocket == 0:
		return fmt.Errorf("%s exists and is not a socket", path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("%s is in use: another server answers on it", path)
	}
	return os.Remove(path)
}
