package attribution

import (
	"sort"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// DefaultDRADrivers returns the DRA drivers whose devices are NVIDIA GPUs:
// NVIDIA's DRA driver (kubernetes-sigs/dra-driver-nvidia-gpu).
func DefaultDRADrivers() []string { return []string{"gpu.nvidia.com"} }

// DRADevice names one device as Dynamic Resource Allocation does: the
// driver, its pool (for NVIDIA's driver, the node) and the device's name
// in the pool ("gpu-0", "gpu-0-mig-1g18gb-19-0" (a DNS label: no dots)).
type DRADevice struct {
	Driver, Pool, Device string
}

func (d DRADevice) String() string { return d.Driver + "/" + d.Pool + "/" + d.Device }

// driverDevice is a DRADevice less its pool: what the fallback knows
// (fallbackDevices).
type driverDevice struct{ driver, device string }

// migKey is a MIG device's placement under one driver, any pool: what the
// fallback matches a claimed MIG device name on (migClaimOwners).
type migKey struct {
	driver string
	MIGPlacement
}

// claimIndex is the DRA part of one List's answer: the containers each
// claimed device of the configured drivers is allocated to.
type claimIndex struct {
	byDevice map[DRADevice][]Owner
	byName   map[driverDevice][]Owner
	byMIG    map[migKey][]Owner // the claimed devices named as MIG devices
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
			if p, ok := ParseMIGName(d.Device); ok {
				if ci.byMIG == nil {
					ci.byMIG = map[migKey][]Owner{}
				}
				k := migKey{d.Driver, p}
				ci.byMIG[k] = appendOwner(ci.byMIG[k], holder)
			}
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
// is matched to a GPU through NVML's minor number; a MIG device's name is
// matched on its placement instead (ParseMIGName).
func fallbackName(minor int) string { return "gpu-" + strconv.Itoa(minor) }

// isMIGName reports whether a device name is NVIDIA's DRA driver's name of a
// MIG device.
func isMIGName(name string) bool { return strings.Contains(name, "-mig-") }

// MIGPlacement is what NVIDIA's DRA driver names a MIG device by, and what
// NVML reports of it: its parent GPU's minor number, its GPU instance's
// profile id and the start of the GPU instance's placement
// (nvmlGpuInstanceGetInfo). A GPU instance holds one placement at a time,
// so these name it on the node.
type MIGPlacement struct {
	ParentMinor, ProfileID, Start int
}

// ParseMIGName reads the placement out of NVIDIA's DRA driver's name of a
// MIG device. Since v25.12 the name is
// "gpu-<parent minor>-mig-<profile without dots>-<profile id>-<start>"
// ("gpu-0-mig-1g18gb-19-0"; the profile may hold dashes: "1g18gb-me" for
// 1g.18gb+me); up to v25.8 it was "gpu-<parent minor>-mig-<profile
// id>-<start>-<size>" ("gpu-0-mig-19-0-1"). A profile name always holds a
// letter, so three numbers after "-mig-" are the old form. ok is false for
// any other name.
func ParseMIGName(name string) (p MIGPlacement, ok bool) {
	rest, ok := strings.CutPrefix(name, "gpu-")
	if !ok {
		return p, false
	}
	minor, rest, ok := strings.Cut(rest, "-mig-")
	if !ok || !isNumber(minor) {
		return p, false
	}
	parts := strings.Split(rest, "-")
	n := len(parts)
	switch {
	case n == 3 && isNumber(parts[0]) && isNumber(parts[1]) && isNumber(parts[2]):
		p = MIGPlacement{ParentMinor: atoi(minor), ProfileID: atoi(parts[0]), Start: atoi(parts[1])}
	case n >= 3 && isNumber(parts[n-2]) && isNumber(parts[n-1]) && hasLetter(strings.Join(parts[:n-2], "")):
		p = MIGPlacement{ParentMinor: atoi(minor), ProfileID: atoi(parts[n-2]), Start: atoi(parts[n-1])}
	default:
		return p, false
	}
	return p, true
}

// isNumber reports whether s is a decimal number small enough for an int:
// the driver writes minor numbers, profile ids and starts, all small.
func isNumber(s string) bool {
	if s == "" || len(s) > 9 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

func hasLetter(s string) bool {
	return strings.IndexFunc(s, func(c rune) bool { return c >= 'a' && c <= 'z' }) >= 0
}

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

// SetMIG tells the Attributor a MIG device's placement, by which NVIDIA's
// DRA driver names it: a MIG device made on demand for a claim (dynamic
// MIG) has no uuid attribute in any ResourceSlice, and the fallback
// without slices knows no other name. Call it for each MIG device before
// attributing it.
func (a *Attributor) SetMIG(uuid string, p MIGPlacement) {
	if a.pods == nil {
		return
	}
	if v, ok := a.migs.Load(uuid); !ok || v.(MIGPlacement) != p {
		a.migs.Store(uuid, p)
	}
}

// MIGPlacementUnknown notes a MIG device whose placement NVML would not
// give (the GPU instance's info needs a privileged collector). Where the
// kubelet lists a DRA claim on a device named as a MIG device, that is said
// once: a claim on a MIG device made on demand, which no slice gives a
// uuid, cannot be matched to it.
func (a *Attributor) MIGPlacementUnknown(uuid string) {
	if a.pods == nil {
		return
	}
	s := a.pods.snap.Load()
	if s == nil || len(s.claims.byMIG) == 0 || !a.warned.Once("dra-mig-placement") {
		return
	}
	a.logger.Warn("Cannot read a MIG device's GPU instance placement (NVML gives it to a privileged collector only); "+
		"DRA claims on MIG devices that have no uuid in the ResourceSlices (made on demand, dynamic MIG) are not attributed",
		zap.String("mig_device", uuid))
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
	minor := -1
	if v, ok := a.minors.Load(deviceID); ok {
		minor = v.(int)
	}
	var mig *MIGPlacement
	if v, ok := a.migs.Load(deviceID); ok {
		p := v.(MIGPlacement)
		mig = &p
	}
	var claimed []Owner
	devs, fallback := fallbackDevices(a.pods.drivers, minor), true
	if a.slices != nil {
		devs, fallback = a.slices.devicesOf(deviceID, minor, mig)
	}
	if len(devs) > 0 {
		claimed = a.pods.ClaimOwners(devs...)
	}
	if fallback && mig != nil {
		claimed = a.pods.migClaimOwners(a.pods.drivers, *mig)
	}
	if len(owners) == 0 {
		return claimed
	}
	for _, o := range claimed {
		owners = appendOwner(owners, o)
	}
	sortOwners(owners)
	return owners
}

// migClaimOwners returns the containers whose DRA claims of the drivers
// hold a device named as the MIG device of placement p, in any pool: the
// fallback's match of a MIG device. Nil as for ClaimOwners.
func (c *PodResourcesCache) migClaimOwners(drivers []string, p MIGPlacement) []Owner {
	s := c.snap.Load()
	if s == nil || time.Since(s.at) > c.cfg.MaxAge || s.claims.byMIG == nil {
		return nil
	}
	var out []Owner
	for _, d := range drivers {
		for _, o := range s.claims.byMIG[migKey{d, p}] {
			out = appendOwner(out, o)
		}
	}
	sortOwners(out)
	return out
}
