package attribution

import (
	"sort"
	"strconv"
	"strings"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// DefaultDRADrivers returns the DRA drivers whose devices are NVIDIA GPUs:
// NVIDIA's DRA driver (kubernetes-sigs/dra-driver-nvidia-gpu).
func DefaultDRADrivers() []string { return []string{"gpu.nvidia.com"} }

// DRADevice names one device as Dynamic Resource Allocation does: the
// driver, its pool (for NVIDIA's driver, the node) and the device's name
// in the pool ("gpu-0", "gpu-0-mig-1g18gb-9-0" (a DNS label: no dots)).
type DRADevice struct {
	Driver, Pool, Device string
}

func (d DRADevice) String() string { return d.Driver + "/" + d.Pool + "/" + d.Device }

// driverDevice is a DRADevice less its pool: what the fallback knows
// (fallbackDevices).
type driverDevice struct{ driver, device string }

// claimIndex is the DRA part of one List's answer: the containers each
// claimed device of the configured drivers is allocated to.
type claimIndex struct {
	byDevice map[DRADevice][]Owner
	byName   map[driverDevice][]Owner
}

// addClaims indexes a container's DRA allocations of the drivers given.
// The claim's namespace is the pod's: a pod references claims of its own
// namespace only, so it is not kept apart. A device shared through
// share_id, or one claim shared by several pods, lists each holder once.
func (ci *claimIndex) addClaims(ctr *podresourcesv1.ContainerResources, o Owner, drivers []string) {
	for _, dr := range ctr.GetDynamicResources() {
		holder := o
		holder.ClaimName = dr.GetClaimName()
		for _, cr := range dr.GetClaimResources() {
			if !isOneOf(cr.GetDriverName(), drivers) || cr.GetDeviceName() == "" {
				continue
			}
			if ci.byDevice == nil {
				ci.byDevice, ci.byName = map[DRADevice][]Owner{}, map[driverDevice][]Owner{}
			}
			d := DRADevice{Driver: cr.GetDriverName(), Pool: cr.GetPoolName(), Device: cr.GetDeviceName()}
			ci.byDevice[d] = appendOwner(ci.byDevice[d], holder)
			n := driverDevice{d.Driver, d.Device}
			ci.byName[n] = appendOwner(ci.byName[n], holder)
		}
	}
}

// devices returns the claimed devices, sorted.
func (ci *claimIndex) devices() []DRADevice {
	out := make([]DRADevice, 0, len(ci.byDevice))
	for d := range ci.byDevice {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

func appendOwner(owners []Owner, o Owner) []Owner {
	for _, have := range owners {
		if have == o {
			return owners
		}
	}
	return append(owners, o)
}

func isOneOf(s string, set []string) bool {
	for _, x := range set {
		if s == x {
			return true
		}
	}
	return false
}

// fallbackName is the name NVIDIA's DRA driver gives a whole GPU of minor
// number minor: "gpu-<minor>". Where the ResourceSlices cannot be read, it
// is the one name that can be matched to a GPU, through NVML's minor
// number; a MIG device's name ("gpu-<minor>-mig-…") cannot be, since
// nothing NVML reports names its placement the same way.
func fallbackName(minor int) string { return "gpu-" + strconv.Itoa(minor) }

// isMIGName reports whether a device name is NVIDIA's DRA driver's name of a
// MIG device.
func isMIGName(name string) bool { return strings.Contains(name, "-mig-") }

// sortOwners orders owners by namespace, pod, container and claim.
func sortOwners(out []Owner) {
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.PodName != b.PodName {
			return a.PodName < b.PodName
		}
		if a.ContainerName != b.ContainerName {
			return a.ContainerName < b.ContainerName
		}
		return a.ClaimName < b.ClaimName
	})
}

// SetMinor tells the Attributor a GPU's NVML minor number, for the
// fallback that matches DRA's gpu-<minor> names where the ResourceSlices
// cannot be read. Call it for each GPU before attributing it; a negative
// minor (unknown) is not matched.
func (a *Attributor) SetMinor(uuid string, minor int) {
	if a.pods == nil {
		return
	}
	if v, ok := a.minors.Load(uuid); !ok || v.(int) != minor {
		a.minors.Store(uuid, minor)
	}
}

// Holders returns the containers the kubelet allocated the device (a GPU's
// or a MIG device's UUID) to, each once, sorted: by the device plugin and
// by DRA claims. Nil without a kubelet, or while its listing is stale.
func (a *Attributor) Holders(deviceID string) []Owner { return a.allocatedTo(deviceID) }

// kubeletAllocation returns the containers the kubelet allocated the device (a
// GPU's or a MIG device's UUID) to: through the device plugin, by UUID, and
// through DRA claims, by the DRA devices that are that UUID (from the
// ResourceSlices, or the fallback). A device of one claim shared by several
// pods, or by several requests through share_id, lists each holder once.
func (a *Attributor) kubeletAllocation(deviceID string) []Owner {
	if a.pods == nil {
		return nil
	}
	owners := a.pods.Owners(deviceID)
	var devs []DRADevice
	minor := -1
	if v, ok := a.minors.Load(deviceID); ok {
		minor = v.(int)
	}
	if a.slices != nil {
		devs = a.slices.devicesOf(deviceID, minor)
	} else {
		devs = fallbackDevices(a.pods.drivers, minor)
	}
	if len(devs) == 0 {
		return owners
	}
	claimed := a.pods.ClaimOwners(devs...)
	if len(owners) == 0 {
		return claimed
	}
	for _, o := range claimed {
		owners = appendOwner(owners, o)
	}
	sortOwners(owners)
	return owners
}
