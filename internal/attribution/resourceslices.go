package attribution

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcev1 "k8s.io/client-go/kubernetes/typed/resource/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/otelcol-nvml/otelcol-nvml/internal/logonce"
)

// ResourceSlicesConfig configures the watch of the node's ResourceSlices,
// which map a DRA device (driver, pool, device) to its GPU's or MIG
// device's UUID.
type ResourceSlicesConfig struct {
	// NodeName is the node whose slices are watched (spec.nodeName).
	NodeName string
	// Kubeconfig is a kubeconfig file; empty means the in-cluster config
	// (the pod's service account).
	Kubeconfig string
}

// The informer's indexes.
const (
	indexUUID   = "uuid"   // a device's uuid attribute
	indexDevice = "device" // DRADevice.String()
	indexMIG    = "mig"    // a uuid-less MIG device's placement (migIndexKey)
)

// The slice watch's states.
const (
	slicesStarting   int32 = iota // not started, or started and not yet listed
	slicesUnreadable              // no config, or the first list failed: the fallback
	slicesWatching                // listed: the slices are the truth
)

// sliceWatcher watches the node's ResourceSlices with a shared informer
// and answers, from its store, which DRA devices a UUID is. It starts on
// the first DRA claim the kubelet lists, so that a cluster without DRA
// makes no API call and logs nothing. Lookups read the informer's
// indexed store and never call the API server.
type sliceWatcher struct {
	cfg     ResourceSlicesConfig
	drivers []string
	logger  *zap.Logger
	// listWatch lists and watches the node's slices; replaced in tests.
	listWatch func(ResourceSlicesConfig) (cache.ListerWatcher, error)

	startOnce sync.Once
	informer  atomic.Pointer[cache.SharedIndexInformer]
	state     atomic.Int32
	stop      chan struct{}
	stopOnce  sync.Once

	// log holds what was said: the slices unreadable (once), and each bad
	// device (a claim naming a device no slice has, a device without uuid).
	log *logonce.Log
}

// maxSliceWarnings bounds the bad devices logged.
const maxSliceWarnings = 16

func newSliceWatcher(cfg ResourceSlicesConfig, drivers []string, logger *zap.Logger) *sliceWatcher {
	return &sliceWatcher{cfg: cfg, drivers: drivers, logger: logger, listWatch: nodeSlices,
		stop: make(chan struct{}), log: NewCauseLog(maxSliceWarnings)}
}

// nodeSlices lists and watches the ResourceSlices of cfg.NodeName through
// resource.k8s.io/v1, with the kubeconfig or in-cluster.
func nodeSlices(cfg ResourceSlicesConfig) (cache.ListerWatcher, error) {
	var rc *rest.Config
	var err error
	if cfg.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, err
	}
	rc.UserAgent = "otelcol-nvml"
	c, err := resourcev1.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return cache.NewFilteredListWatchFromClient(c.RESTClient(), "resourceslices", metav1.NamespaceAll, func(o *metav1.ListOptions) {
		o.FieldSelector = "spec.nodeName=" + cfg.NodeName
	}), nil
}

// start starts the informer, once; later calls do nothing.
func (w *sliceWatcher) start() {
	w.startOnce.Do(func() {
		if err := w.startInformer(); err != nil {
			w.unreadable(err)
		}
	})
}

func (w *sliceWatcher) startInformer() error {
	if w.cfg.NodeName == "" {
		return errors.New("no node name is configured (kubernetes::node_name)")
	}
	lw, err := w.listWatch(w.cfg)
	if err != nil {
		return err
	}
	inf := cache.NewSharedIndexInformer(lw, &resourceapi.ResourceSlice{}, 0, cache.Indexers{
		indexUUID:   w.uuidIndex,
		indexDevice: w.deviceIndex,
		indexMIG:    w.migIndex,
	})
	// The store keeps what the lookups read: no managed fields.
	_ = inf.SetTransform(func(obj any) (any, error) {
		if s, ok := obj.(*resourceapi.ResourceSlice); ok {
			s.ManagedFields = nil
		}
		return obj, nil
	})
	// Replaces client-go's handler, which logs every failed list and
	// watch: a missing RBAC rule is said once here.
	_ = inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		if !inf.HasSynced() {
			w.unreadable(err)
		}
	})
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.checkSlice,
		UpdateFunc: func(_, obj any) { w.checkSlice(obj) },
	})
	w.informer.Store(&inf)
	go inf.Run(w.stop)
	go func() {
		if cache.WaitForCacheSync(w.stop, inf.HasSynced) {
			was := w.state.Swap(slicesWatching)
			if was == slicesUnreadable {
				w.log.OK("unreadable")
				w.logger.Info("The node's ResourceSlices are read again; DRA devices are mapped to GPUs by their uuid attribute",
					zap.String("node", w.cfg.NodeName))
			}
		}
	}()
	return nil
}

// unreadable notes that the slices cannot be read, and says so once.
func (w *sliceWatcher) unreadable(err error) {
	if !w.state.CompareAndSwap(slicesStarting, slicesUnreadable) && w.state.Load() != slicesUnreadable {
		return
	}
	if w.log.Fail("unreadable", "").Log {
		w.logger.Warn("Cannot read the node's ResourceSlices (resource.k8s.io/v1); GPUs allocated through DRA claims are matched by "+
			"the fallback instead: the device name gpu-<minor> against the GPU's minor number, and a MIG device's name against its parent's minor "+
			"number, GPU instance profile id and placement start. "+
			"Grant get/list/watch on resourceslices (the chart's draResourceSlices value), or set kubernetes::dra::resource_slices::kubeconfig",
			zap.String("node", w.cfg.NodeName), zap.Error(err))
	}
}

// shutdown stops the informer.
func (w *sliceWatcher) shutdown() { w.stopOnce.Do(func() { close(w.stop) }) }

// synced returns the informer's store once it has listed the slices.
func (w *sliceWatcher) synced() cache.Indexer {
	if w.state.Load() != slicesWatching {
		return nil
	}
	return (*w.informer.Load()).GetIndexer()
}

// devicesOf returns the DRA devices that are the device uuid, from the
// slices: those whose uuid attribute is uuid and, for a MIG device of
// placement mig (nil: not a MIG device, or its placement unknown), the
// MIG devices without a uuid named by that placement (dynamic MIG: the
// driver never publishes their uuid). Where the slices cannot be read,
// fallback is true and devs is the name gpu-<minor> of each driver, in
// any pool, for a GPU of minor number minor (negative: unknown); a MIG
// device is then matched on the claims' names (migClaimOwners). Until the
// first list answers (a second or so after the first claim) it returns
// none: neither source is known yet.
func (w *sliceWatcher) devicesOf(uuid string, minor int, mig *MIGPlacement) (devs []DRADevice, fallback bool) {
	switch w.state.Load() {
	case slicesStarting:
		return nil, false
	case slicesUnreadable:
		return fallbackDevices(w.drivers, minor), true
	}
	idx := w.synced()
	if idx == nil {
		return fallbackDevices(w.drivers, minor), true
	}
	var out []DRADevice
	objs, _ := idx.ByIndex(indexUUID, uuid)
	for _, obj := range objs {
		s := obj.(*resourceapi.ResourceSlice)
		for i := range s.Spec.Devices {
			if deviceUUID(s.Spec.Driver, &s.Spec.Devices[i]) == uuid {
				out = append(out, DRADevice{Driver: s.Spec.Driver, Pool: s.Spec.Pool.Name, Device: s.Spec.Devices[i].Name})
			}
		}
	}
	if mig == nil {
		return out, false
	}
	key := migIndexKey(*mig)
	objs, _ = idx.ByIndex(indexMIG, key)
	for _, obj := range objs {
		s := obj.(*resourceapi.ResourceSlice)
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			if p, ok := uuidlessMIG(s.Spec.Driver, d); ok && migIndexKey(p) == key {
				out = append(out, DRADevice{Driver: s.Spec.Driver, Pool: s.Spec.Pool.Name, Device: d.Name})
			}
		}
	}
	return out, false
}

// uuidlessMIG returns the placement of a MIG device the slice lists
// without a uuid: one NVIDIA's driver makes on demand (dynamic MIG), which
// is matched by its name. A device with a uuid is matched by it alone.
func uuidlessMIG(driver string, d *resourceapi.Device) (MIGPlacement, bool) {
	if deviceUUID(driver, d) != "" {
		return MIGPlacement{}, false
	}
	return ParseMIGName(d.Name)
}

func migIndexKey(p MIGPlacement) string {
	return strconv.Itoa(p.ParentMinor) + "/" + strconv.Itoa(p.ProfileID) + "/" + strconv.Itoa(p.Start)
}

// fallbackDevices is the name gpu-<minor> under each driver, any pool.
func fallbackDevices(drivers []string, minor int) []DRADevice {
	if minor < 0 {
		return nil
	}
	out := make([]DRADevice, len(drivers))
	for i, d := range drivers {
		out[i] = DRADevice{Driver: d, Device: fallbackName(minor)}
	}
	return out
}

// checkClaims logs, once per device, a claimed device that no GPU can be
// found for: with the slices, a device no slice of the node has; without
// them, a MIG device whose name holds no placement. Called after each
// List.
func (w *sliceWatcher) checkClaims(ci *claimIndex) {
	idx := w.synced()
	if idx == nil && w.state.Load() != slicesUnreadable {
		return // not listed yet
	}
	for _, d := range ci.devices() {
		switch {
		case idx == nil:
			if _, ok := ParseMIGName(d.Device); !ok && isMIGName(d.Device) && w.log.Fail("fallback "+d.String(), "").Log {
				w.logger.Warn("A DRA claim holds a MIG device whose name is not NVIDIA's DRA driver's (gpu-<minor>-mig-<profile>-<profile id>-<start>), "+
					"which cannot be matched to a MIG device without the ResourceSlices; it is not attributed",
					zap.String("driver", d.Driver), zap.String("pool", d.Pool), zap.String("device", d.Device))
			}
		default:
			objs, _ := idx.ByIndex(indexDevice, d.String())
			if len(objs) == 0 && w.log.Fail("missing "+d.String(), "").Log {
				w.logger.Warn("A DRA claim names a device that no ResourceSlice of this node has; it is not attributed to any GPU",
					zap.String("driver", d.Driver), zap.String("pool", d.Pool), zap.String("device", d.Device),
					zap.Strings("claims", claimNames(ci.byDevice[d])))
			}
		}
	}
}

// checkSlice logs, once per device, a device of a slice without a uuid
// attribute that cannot be matched to a GPU. A MIG device named by its
// placement is not one: NVIDIA's driver never gives a MIG device it makes
// on demand a uuid (about 25 such devices per Hopper GPU, which would
// fill the warnings' budget at once), and it is matched by its name.
func (w *sliceWatcher) checkSlice(obj any) {
	s, ok := obj.(*resourceapi.ResourceSlice)
	if !ok || !isOneOf(s.Spec.Driver, w.drivers) {
		return
	}
	for i := range s.Spec.Devices {
		d := &s.Spec.Devices[i]
		if deviceUUID(s.Spec.Driver, d) != "" {
			continue
		}
		if _, ok := ParseMIGName(d.Name); ok {
			continue
		}
		dev := DRADevice{Driver: s.Spec.Driver, Pool: s.Spec.Pool.Name, Device: d.Name}
		if w.log.Fail("nouuid "+dev.String(), "").Log {
			w.logger.Warn("A ResourceSlice lists a GPU device without a uuid attribute; claims on it are not attributed to any GPU",
				zap.String("slice", s.Name), zap.String("driver", dev.Driver), zap.String("pool", dev.Pool), zap.String("device", dev.Device))
		}
	}
}

func claimNames(owners []Owner) []string {
	var out []string
	for _, o := range owners {
		n := o.Namespace + "/" + o.ClaimName
		if !isOneOf(n, out) {
			out = append(out, n)
		}
	}
	return out
}

// deviceUUID is a device's uuid attribute ("uuid", or qualified with the
// driver's domain); "" when it has none.
func deviceUUID(driver string, d *resourceapi.Device) string {
	for name, a := range d.Attributes {
		n := string(name)
		if n != "uuid" && n != driver+"/uuid" || a.StringValue == nil {
			continue
		}
		if u := strings.TrimSpace(*a.StringValue); u != "" {
			return u
		}
	}
	return ""
}

// uuidIndex indexes a slice of the drivers by its devices' uuids.
func (w *sliceWatcher) uuidIndex(obj any) ([]string, error) {
	s, ok := obj.(*resourceapi.ResourceSlice)
	if !ok || !isOneOf(s.Spec.Driver, w.drivers) {
		return nil, nil
	}
	var out []string
	for i := range s.Spec.Devices {
		if u := deviceUUID(s.Spec.Driver, &s.Spec.Devices[i]); u != "" {
			out = append(out, u)
		}
	}
	return out, nil
}

// migIndex indexes a slice of the drivers by the placements of its MIG
// devices without a uuid.
func (w *sliceWatcher) migIndex(obj any) ([]string, error) {
	s, ok := obj.(*resourceapi.ResourceSlice)
	if !ok || !isOneOf(s.Spec.Driver, w.drivers) {
		return nil, nil
	}
	var out []string
	for i := range s.Spec.Devices {
		if p, ok := uuidlessMIG(s.Spec.Driver, &s.Spec.Devices[i]); ok {
			out = append(out, migIndexKey(p))
		}
	}
	return out, nil
}

// deviceIndex indexes a slice of the drivers by its devices' DRADevice.
func (w *sliceWatcher) deviceIndex(obj any) ([]string, error) {
	s, ok := obj.(*resourceapi.ResourceSlice)
	if !ok || !isOneOf(s.Spec.Driver, w.drivers) {
		return nil, nil
	}
	out := make([]string, len(s.Spec.Devices))
	for i := range s.Spec.Devices {
		out[i] = DRADevice{Driver: s.Spec.Driver, Pool: s.Spec.Pool.Name, Device: s.Spec.Devices[i].Name}.String()
	}
	return out, nil
}
