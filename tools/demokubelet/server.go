package main

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// server answers the kubelet's PodResources v1 calls from a Node. Every
// answer is built anew, so that a caller cannot change what the next one
// gets.
type server struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	node *Node
}

func newServer(n *Node) *server { return &server{node: n} }

// List returns every pod, as the kubelet's List does.
func (s *server) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	resp := &podresourcesv1.ListPodResourcesResponse{}
	for _, p := range s.node.Pods {
		resp.PodResources = append(resp.PodResources, podResources(p))
	}
	return resp, nil
}

// Get returns one pod by namespace and name; NotFound for another, as the
// kubelet answers.
func (s *server) Get(_ context.Context, req *podresourcesv1.GetPodResourcesRequest) (*podresourcesv1.GetPodResourcesResponse, error) {
	for _, p := range s.node.Pods {
		if p.Namespace == req.GetPodNamespace() && p.Name == req.GetPodName() {
			return &podresourcesv1.GetPodResourcesResponse{PodResources: podResources(p)}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "pod %s not found in namespace %s", req.GetPodName(), req.GetPodNamespace())
}

// GetAllocatableResources returns the node's allocatable devices.
func (s *server) GetAllocatableResources(context.Context, *podresourcesv1.AllocatableResourcesRequest) (*podresourcesv1.AllocatableResourcesResponse, error) {
	return &podresourcesv1.AllocatableResourcesResponse{Devices: containerDevices(s.node.Allocatable)}, nil
}

func podResources(p Pod) *podresourcesv1.PodResources {
	out := &podresourcesv1.PodResources{Name: p.Name, Namespace: p.Namespace}
	for _, c := range p.Containers {
		out.Containers = append(out.Containers, &podresourcesv1.ContainerResources{
			Name:             c.Name,
			Devices:          containerDevices(c.Devices),
			DynamicResources: dynamicResources(p.Namespace, c.Claims),
		})
	}
	return out
}

// dynamicResources serves a container's DRA claims as the kubelet does.
func dynamicResources(namespace string, claims []Claim) []*podresourcesv1.DynamicResource {
	var out []*podresourcesv1.DynamicResource
	for _, c := range claims {
		dr := &podresourcesv1.DynamicResource{ClaimName: c.Name, ClaimNamespace: namespace}
		for _, d := range c.Devices {
			cr := &podresourcesv1.ClaimResource{DriverName: d.Driver, PoolName: d.Pool, DeviceName: d.Device}
			if d.ShareID != "" {
				id := d.ShareID
				cr.ShareId = &id
			}
			dr.ClaimResources = append(dr.ClaimResources, cr)
		}
		out = append(out, dr)
	}
	return out
}

func containerDevices(ds []Devices) []*podresourcesv1.ContainerDevices {
	var out []*podresourcesv1.ContainerDevices
	for _, d := range ds {
		out = append(out, &podresourcesv1.ContainerDevices{
			ResourceName: d.Resource,
			DeviceIds:    append([]string(nil), d.IDs...),
		})
	}
	return out
}
