package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
)

// maxPodsFile caps what is read of a pods file: the demo's is under 2 KiB.
const maxPodsFile = 1 << 20

// Node is a pods file: the pods of one simulated node and the devices its
// device plugins offer. Its JSON keys are the field tags; unknown keys are
// an error.
type Node struct {
	// Comment is free text, not served.
	Comment string `json:"comment,omitempty"`
	// Pods are served by List and Get.
	Pods []Pod `json:"pods"`
	// Allocatable is served by GetAllocatableResources; every device
	// allocated to a container must be listed here.
	Allocatable []Devices `json:"allocatable"`
}

// Pod is one pod and its containers.
type Pod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// UID is the pod's UID as its cgroup names it (8-4-4-4-12 lowercase
	// hex, or 32 for a static pod); optional, not served: the kubelet's
	// PodResources API has no pod UIDs.
	UID        string      `json:"uid,omitempty"`
	Containers []Container `json:"containers"`
}

// Container is one container of a pod and the devices allocated to it.
type Container struct {
	Name string `json:"name"`
	// ID is the runtime's container id (64 lowercase hex) as its cgroup
	// names it; optional, not served, like Pod.UID.
	ID      string    `json:"id,omitempty"`
	Devices []Devices `json:"devices"`
	// Claims are the container's DRA claims, served as its
	// dynamic_resources (Kubernetes 1.34 and later).
	Claims []Claim `json:"claims,omitempty"`
}

// Claim is one DRA ResourceClaim of a container, in the pod's namespace,
// and the devices allocated through it.
type Claim struct {
	Name    string        `json:"name"`
	Devices []ClaimDevice `json:"devices"`
}

// ClaimDevice is one device of a claim, as a DRA driver names it:
// NVIDIA's driver gpu.nvidia.com, pool the node, device gpu-<minor>.
type ClaimDevice struct {
	Driver string `json:"driver"`
	Pool   string `json:"pool"`
	Device string `json:"device"`
	// ShareID is set for a device shared between requests (consumable
	// capacity); optional.
	ShareID string `json:"share_id,omitempty"`
}

// validate checks that a claim has a name and each device its driver,
// pool and name.
func (c Claim) validate(where string) error {
	if c.Name == "" {
		return fmt.Errorf("%s: name is required", where)
	}
	if len(c.Devices) == 0 {
		return fmt.Errorf("%s: devices are required", where)
	}
	for i, d := range c.Devices {
		if d.Driver == "" || d.Pool == "" || d.Device == "" {
			return fmt.Errorf("%s devices[%d]: driver, pool and device are required", where, i)
		}
	}
	return nil
}

// Devices are device ids of one extended resource (nvidia.com/gpu,
// nvidia.com/mig-1g.18gb, ...): GPU or MIG UUIDs under NVIDIA's device
// plugin.
type Devices struct {
	Resource string   `json:"resource"`
	IDs      []string `json:"ids"`
}

var (
	podUIDPattern      = regexp.MustCompile(`^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32})$`)
	containerIDPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// ParseNode reads a pods file: one JSON object, strictly (unknown keys,
// trailing data and a file over 1 MiB are errors), then checks it (see
// Node.Validate).
func ParseNode(r io.Reader) (*Node, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxPodsFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxPodsFile {
		return nil, fmt.Errorf("pods file larger than %d bytes", maxPodsFile)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var n Node
	if err := dec.Decode(&n); err != nil {
		return nil, fmt.Errorf("pods file: %w", err)
	}
	if dec.More() {
		return nil, errors.New("pods file: data after the JSON object")
	}
	if err := n.Validate(); err != nil {
		return nil, err
	}
	return &n, nil
}

// Validate checks what a kubelet would never serve: a pod without a
// namespace or name, two pods of one name in a namespace, two containers of
// one name in a pod, a device list without a resource or ids, an empty or
// repeated device id, a device allocated twice or not allocatable, and a
// UID or container id not shaped as cgroups name them. Every error names
// the pod, container and field.
func (n *Node) Validate() error {
	var errs []error
	allocatable := map[string]string{} // device id: resource
	for i, d := range n.Allocatable {
		where := fmt.Sprintf("allocatable[%d]", i)
		if err := d.validate(where); err != nil {
			errs = append(errs, err)
			continue
		}
		for _, id := range d.IDs {
			if r, dup := allocatable[id]; dup {
				errs = append(errs, fmt.Errorf("%s: device %q is already allocatable under %s", where, id, r))
				continue
			}
			allocatable[id] = d.Resource
		}
	}
	pods := map[string]bool{}
	allocatedTo := map[string]string{} // device id: namespace/pod/container
	for i, p := range n.Pods {
		where := fmt.Sprintf("pods[%d]", i)
		if p.Namespace == "" || p.Name == "" {
			errs = append(errs, fmt.Errorf("%s: namespace and name are required", where))
			continue
		}
		where = fmt.Sprintf("pods[%d] (%s/%s)", i, p.Namespace, p.Name)
		if pods[p.Namespace+"/"+p.Name] {
			errs = append(errs, fmt.Errorf("%s: a second pod of this namespace and name", where))
		}
		pods[p.Namespace+"/"+p.Name] = true
		if p.UID != "" && !podUIDPattern.MatchString(p.UID) {
			errs = append(errs, fmt.Errorf("%s: uid %q is not 8-4-4-4-12 (or 32) lowercase hex", where, p.UID))
		}
		if len(p.Containers) == 0 {
			errs = append(errs, fmt.Errorf("%s: no containers", where))
		}
		containers := map[string]bool{}
		for j, c := range p.Containers {
			cwhere := fmt.Sprintf("%s containers[%d]", where, j)
			if c.Name == "" {
				errs = append(errs, fmt.Errorf("%s: name is required", cwhere))
				continue
			}
			cwhere = fmt.Sprintf("%s container %s", where, c.Name)
			if containers[c.Name] {
				errs = append(errs, fmt.Errorf("%s: a second container of this name", cwhere))
			}
			containers[c.Name] = true
			if c.ID != "" && !containerIDPattern.MatchString(c.ID) {
				errs = append(errs, fmt.Errorf("%s: id %q is not 64 lowercase hex", cwhere, c.ID))
			}
			for k, cl := range c.Claims {
				if err := cl.validate(fmt.Sprintf("%s claims[%d]", cwhere, k)); err != nil {
					errs = append(errs, err)
				}
			}
			for k, d := range c.Devices {
				dwhere := fmt.Sprintf("%s devices[%d]", cwhere, k)
				if err := d.validate(dwhere); err != nil {
					errs = append(errs, err)
					continue
				}
				for _, id := range d.IDs {
					holder := p.Namespace + "/" + p.Name + "/" + c.Name
					if prev, dup := allocatedTo[id]; dup {
						errs = append(errs, fmt.Errorf("%s: device %q is already allocated to %s", dwhere, id, prev))
						continue
					}
					allocatedTo[id] = holder
					switch r, ok := allocatable[id]; {
					case !ok:
						errs = append(errs, fmt.Errorf("%s: device %q is not in allocatable", dwhere, id))
					case r != d.Resource:
						errs = append(errs, fmt.Errorf("%s: device %q is allocatable as %s, not %s", dwhere, id, r, d.Resource))
					}
				}
			}
		}
	}
	return errors.Join(errs...)
}

func (d Devices) validate(where string) error {
	if d.Resource == "" {
		return fmt.Errorf("%s: resource is required", where)
	}
	if len(d.IDs) == 0 {
		return fmt.Errorf("%s: ids are required", where)
	}
	seen := map[string]bool{}
	for _, id := range d.IDs {
		if id == "" {
			return fmt.Errorf("%s: an empty device id", where)
		}
		if seen[id] {
			return fmt.Errorf("%s: device %q listed twice", where, id)
		}
		seen[id] = true
	}
	return nil
}
