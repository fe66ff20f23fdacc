package attribution

import (
	"context"
	"errors"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/otelcol-nvml/otelcol-nvml/internal/logonce"
)

// DefaultPodResourcesSocket is where the kubelet serves the PodResources
// API.
const DefaultPodResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"

// maxPodResourcesMsg is the kubelet client's own limit for a List answer.
const maxPodResourcesMsg = 16 << 20

// DefaultResourcePrefixes returns the extended resources whose device ids
// are NVIDIA GPUs under NVIDIA's device plugin: nvidia.com/gpu (also
// nvidia.com/gpu.shared, the renamed time-slicing or MPS resource) and
// nvidia.com/mig-<profile> (the MIG "mixed" strategy). Other device plugins
// name theirs otherwise; PodResourcesConfig.ResourcePrefixes takes those.
func DefaultResourcePrefixes() []string { return []string{"nvidia.com/gpu", "nvidia.com/mig-"} }

// PodResourcesConfig configures a PodResourcesCache.
type PodResourcesConfig struct {
	// Socket is the kubelet's PodResources unix socket; an absolute path.
	Socket string
	// RefreshInterval is how often the allocation is listed.
	RefreshInterval time.Duration
	// Timeout bounds one refresh: connecting and listing.
	Timeout time.Duration
	// ResourcePrefixes selects the resources whose device ids are kept, by
	// name prefix; empty means DefaultResourcePrefixes().
	ResourcePrefixes []string
	// MaxAge bounds the age of the allocation served: a kubelet that
	// answered once and then hung must not keep stale pod names for ever.
	// Past it, Owners answers nothing (cgroup-only attribution) until a List
	// succeeds again. Zero means defaultMaxAge of RefreshInterval and Timeout.
	MaxAge time.Duration
	// DRADrivers selects the DRA claims kept (dynamic_resources), by
	// driver name; nil means DefaultDRADrivers(), empty (non-nil) none.
	DRADrivers []string
}

// defaultMaxAge is the age past which a cached allocation is dropped: three
// refreshes missed (1m35s with the 30 s refresh and 5 s timeout).
func defaultMaxAge(refresh, timeout time.Duration) time.Duration {
	return 3*refresh + timeout
}

// DefaultPodResourcesConfig returns the kubelet's socket, a 30 s refresh
// and a 5 s timeout.
func DefaultPodResourcesConfig() PodResourcesConfig {
	return PodResourcesConfig{
		Socket:          DefaultPodResourcesSocket,
		RefreshInterval: 30 * time.Second,
		Timeout:         5 * time.Second,
	}
}

// podSnapshot is one List's answer, indexed; never changed once stored.
type podSnapshot struct {
	// byID maps a device id to the containers it is allocated to. A
	// time-slicing replica "<id>::<n>" is found under itself and under
	// <id>, so that a GPU's UUID finds every pod that holds a replica.
	byID map[string][]Owner
	at   time.Time
	// notUUIDs describes the GPU device ids listed when none of them is a
	// GPU or MIG UUID; zero when one is, or when none is listed.
	notUUIDs nonUUIDIDs
	// claims is the DRA allocation of the configured drivers (dra.go).
	claims claimIndex
}

// nonUUIDIDs describes device ids that cannot match a GPU: the device plugin
// names GPUs by index ("0", GKE's "nvidia0"), not by UUID.
type nonUUIDIDs struct {
	// cause is the ids' shapes, digits as "N", sorted: "nvidiaN",
	// "nvidiaN/vgpuN", "N", "N:N"; "" for none.
	cause     string
	ids       []string // a few of them, sorted
	resources []string // their resources, sorted
}

// Bounds on what nonUUIDIDs keeps of a List answer.
const (
	maxNonUUIDShapes = 8
	maxNonUUIDIDs    = 4
)

// isNVMLUUID reports whether a device id is named as NVML names GPUs and
// MIG devices: "GPU-<uuid>", "MIG-<uuid>" (or "MIG-GPU-<uuid>/<gi>/<ci>"
// on older drivers), possibly with a time-slicing replica's "::<n>".
func isNVMLUUID(id string) bool {
	return strings.HasPrefix(id, "GPU-") || strings.HasPrefix(id, "MIG-")
}

// idShape is a device id with each run of digits written "N".
func idShape(id string) string {
	var b strings.Builder
	digits := false
	for _, r := range id {
		if '0' <= r && r <= '9' {
			if !digits {
				b.WriteByte('N')
			}
			digits = true
			continue
		}
		digits = false
		b.WriteRune(r)
	}
	return b.String()
}

// PodResourcesCache keeps the kubelet's GPU allocation: which pod and
// container each GPU, MIG device and time-slicing replica is allocated to.
// A background goroutine lists it every RefreshInterval; Owners only reads
// the last good answer and never blocks or dials.
type PodResourcesCache struct {
	cfg      PodResourcesConfig
	logger   *zap.Logger
	prefixes []string
	drivers  []string
	// onClaims, when set, is called after each List that lists DRA claims
	// of the drivers (from the refresh goroutine): it starts the
	// ResourceSlice watch only where claims exist.
	onClaims func(*claimIndex)

	snap atomic.Pointer[podSnapshot]

	mu      sync.Mutex // guards cancel, done, started
	cancel  context.CancelFunc
	done    chan struct{}
	started bool

	// listLog remembers the List errors logged (keyList, by errorKey) and
	// the expiry (keyExpired), till the kubelet answers again.
	listLog *logonce.Log
	// notUUIDWarned holds the nonUUIDIDs causes logged, at most
	// maxNonUUIDShapes.
	notUUIDWarned *logonce.Log
}

// The keys of PodResourcesCache.listLog.
const (
	keyList    = "list"
	keyExpired = "expired"
)

// NewPodResourcesCache returns a cache that does nothing until Start. A nil
// logger logs nothing. An empty Socket or ResourcePrefixes, or a zero
// RefreshInterval or Timeout, takes the default.
func NewPodResourcesCache(cfg PodResourcesConfig, logger *zap.Logger) *PodResourcesCache {
	def := DefaultPodResourcesConfig()
	if cfg.Socket == "" {
		cfg.Socket = def.Socket
	}
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = def.RefreshInterval
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = def.Timeout
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = defaultMaxAge(cfg.RefreshInterval, cfg.Timeout)
	}
	prefixes := cfg.ResourcePrefixes
	if len(prefixes) == 0 {
		prefixes = DefaultResourcePrefixes()
	}
	drivers := cfg.DRADrivers
	if drivers == nil {
		drivers = DefaultDRADrivers()
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &PodResourcesCache{cfg: cfg, logger: logger, prefixes: append([]string(nil), prefixes...), drivers: append([]string{}, drivers...),
		notUUIDWarned: NewCauseLog(maxNonUUIDShapes), listLog: logonce.New(2)}
}

// Start launches the refresh goroutine and returns at once: the first List
// runs in the background, so a slow or missing socket never delays the
// caller. ctx is not kept (as for a collector component's Start). Calling
// Start twice is an error.
func (c *PodResourcesCache) Start(_ context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return errors.New("PodResources cache already started")
	}
	c.started = true
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel, c.done = cancel, make(chan struct{})
	go c.run(ctx, c.done)
	return nil
}

// Shutdown stops the refresh goroutine, cancelling a List in flight, and
// waits for it to end or for ctx. Shutdown without Start, or twice, is a
// no-op. The last good allocation stays readable.
func (c *PodResourcesCache) Shutdown(ctx context.Context) error {
	c.mu.Lock()
	cancel, done := c.cancel, c.done
	c.cancel = nil
	c.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *PodResourcesCache) run(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(c.cfg.RefreshInterval)
	defer t.Stop()
	for {
		c.refreshAndLog(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// refreshAndLog runs one refresh and logs a failure once per distinct
// error, and the recovery after one.
func (c *PodResourcesCache) refreshAndLog(ctx context.Context) {
	n, err := c.refresh(ctx)
	switch {
	case err != nil && ctx.Err() != nil:
		// Shutting down.
	case err != nil:
		if s := c.snap.Load(); s != nil && time.Since(s.at) > c.cfg.MaxAge && c.listLog.Once(keyExpired) {
			c.logger.Warn("The last PodResources allocation listed is too old; GPUs are reported without pod names (cgroup attribution only) until the kubelet answers",
				zap.String("socket", c.cfg.Socket), zap.Duration("max_age", c.cfg.MaxAge), zap.Time("listed_at", s.at))
		}
		if c.listLog.Fail(keyList, errorKey(err)).Log {
			msg := "Cannot list the kubelet's PodResources; GPUs are reported without pod names until it answers"
			if c.snap.Load() != nil {
				msg = "Cannot list the kubelet's PodResources; the last allocation listed is kept until it answers"
			}
			c.logger.Warn(msg, zap.String("socket", c.cfg.Socket), zap.Duration("timeout", c.cfg.Timeout), zap.Error(err))
		}
	default:
		c.listLog.OK(keyExpired)
		if c.listLog.OK(keyList) {
			c.logger.Info("The kubelet's PodResources answer again", zap.String("socket", c.cfg.Socket), zap.Int("devices", n))
		}
	}
	if err == nil {
		c.warnNonUUIDs(c.snap.Load())
	}
}

// warnNonUUIDs logs, once per cause, an allocation whose GPU device ids
// are none of them GPU or MIG UUIDs: Owners is asked by UUID, so no GPU
// gets pod names, and the List's success would say nothing of it.
func (c *PodResourcesCache) warnNonUUIDs(s *podSnapshot) {
	if s == nil || s.notUUIDs.cause == "" {
		return
	}
	if !c.notUUIDWarned.Once(s.notUUIDs.cause) {
		return
	}
	c.logger.Warn("The kubelet lists GPUs by ids that are not GPU UUIDs, so pod names cannot be attached to GPUs "+
		"(container.id and k8s.pod.uid from cgroups still are): the device plugin names devices by index. "+
		"NVIDIA's device plugin names them by UUID with DEVICE_ID_STRATEGY=uuid, its default; "+
		"GKE's device plugin always names them by index (nvidia0, ...)",
		zap.Strings("resources", s.notUUIDs.resources), zap.Strings("device_ids", s.notUUIDs.ids),
		zap.String("socket", c.cfg.Socket))
}

// errorKey tells errors apart for logging: a timeout is one error whatever
// the transport says of it; other gRPC errors by code and message (a
// missing socket, a refused connection, a denied one).
func errorKey(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return err.Error()
	}
	if st.Code() == codes.DeadlineExceeded || st.Code() == codes.Canceled {
		return st.Code().String()
	}
	return st.Code().String() + ": " + st.Message()
}

// refresh lists the allocation once, over a connection of its own that is
// closed at once: nothing is held between refreshes, so a kubelet restart
// needs no reconnection logic. It stores the new snapshot and returns the
// number of device ids in it.
func (c *PodResourcesCache) refresh(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	// The socket is dialled here first, so that a missing or refusing
	// kubelet is one error of ours, logged once, rather than also a gRPC
	// transport warning on every refresh. gRPC gets the connection.
	first, err := (&net.Dialer{}).DialContext(ctx, "unix", c.cfg.Socket)
	if err != nil {
		return 0, err
	}
	var handedOver atomic.Bool
	defer func() {
		if !handedOver.Load() {
			first.Close()
		}
	}()
	// The socket is dialled as given, not parsed as a target URL.
	conn, err := grpc.NewClient("passthrough:///kubelet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			if handedOver.CompareAndSwap(false, true) {
				return first, nil
			}
			return (&net.Dialer{}).DialContext(ctx, "unix", c.cfg.Socket)
		}),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxPodResourcesMsg)))
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	resp, err := podresourcesv1.NewPodResourcesListerClient(conn).List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		return 0, err
	}
	snap := buildSnapshot(resp, c.prefixes, c.drivers...)
	snap.at = time.Now()
	c.snap.Store(snap)
	if c.onClaims != nil && len(snap.claims.byDevice) > 0 {
		c.onClaims(&snap.claims)
	}
	return len(snap.byID) + len(snap.claims.byDevice), nil
}

// buildSnapshot indexes a List answer by device id, and the DRA claims of
// drivers by device, and notes device ids none of which is a GPU or MIG
// UUID. A kubelet without DRA (older than 1.34, or the gate off) lists no
// dynamic_resources: nothing to index, nothing to say.
func buildSnapshot(resp *podresourcesv1.ListPodResourcesResponse, prefixes []string, drivers ...string) *podSnapshot {
	s := &podSnapshot{byID: map[string][]Owner{}}
	anyUUID := false
	shapes, ids, resources := map[string]bool{}, map[string]bool{}, map[string]bool{}
	note := func(resource, id string) {
		if anyUUID || isNVMLUUID(id) {
			anyUUID = true
			return
		}
		if len(shapes) < maxNonUUIDShapes {
			shapes[idShape(id)] = true
		}
		if len(ids) < maxNonUUIDIDs {
			ids[id] = true
		}
		if len(resources) < maxNonUUIDShapes {
			resources[resource] = true
		}
	}
	add := func(id string, o Owner) {
		for _, have := range s.byID[id] {
			if have == o {
				return
			}
		}
		s.byID[id] = append(s.byID[id], o)
	}
	for _, pod := range resp.GetPodResources() {
		for _, ctr := range pod.GetContainers() {
			o := Owner{PodName: pod.GetName(), Namespace: pod.GetNamespace(), ContainerName: ctr.GetName()}
			s.claims.addClaims(ctr, o, drivers)
			for _, dev := range ctr.GetDevices() {
				if !hasAnyPrefix(dev.GetResourceName(), prefixes) {
					continue
				}
				for _, id := range dev.GetDeviceIds() {
					if id == "" {
						continue
					}
					add(id, o)
					if base, ok := replicaBase(id); ok {
						add(base, o)
					}
					note(dev.GetResourceName(), id)
				}
			}
		}
	}
	if !anyUUID && len(shapes) > 0 {
		s.notUUIDs = nonUUIDIDs{cause: strings.Join(sortedKeys(shapes), ","), ids: sortedKeys(ids), resources: sortedKeys(resources)}
	}
	return s
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// replicaBase returns <id> for a time-slicing replica id "<id>::<n>".
func replicaBase(id string) (string, bool) {
	i := strings.LastIndex(id, "::")
	if i <= 0 || i+2 == len(id) {
		return "", false
	}
	for _, c := range id[i+2:] {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return id[:i], true
}

// Owners returns the containers that hold any of deviceIDs, each once, in a
// stable order; nil when none does, before the first successful List, or
// when the last one is older than MaxAge.
// A GPU UUID also finds the holders of its time-slicing replicas
// ("<UUID>::<n>"). Pass a GPU's UUID together with its MIG devices' UUIDs
// to get everything allocated on that GPU; with the device plugin's
// "index" id strategy, pass the index ("0") or MIG index too. The Owners
// have PodName, Namespace and ContainerName; the kubelet's List gives no
// pod UID or container id. It never blocks.
func (c *PodResourcesCache) Owners(deviceIDs ...string) []Owner {
	s := c.snap.Load()
	if s == nil || time.Since(s.at) > c.cfg.MaxAge {
		return nil
	}
	var out []Owner
	for _, id := range deviceIDs {
	next:
		for _, o := range s.byID[id] {
			for _, have := range out {
				if have == o {
					continue next
				}
			}
			out = append(out, o)
		}
	}
	sortOwners(out)
	return out
}

// ClaimOwners returns the containers whose DRA claims hold any of devs, each
// once, in Owners' order; nil as for Owners. A device with an empty Pool
// matches its name under any pool of its driver (the fallback, where the
// ResourceSlices are not known). It never blocks.
func (c *PodResourcesCache) ClaimOwners(devs ...DRADevice) []Owner {
	s := c.snap.Load()
	if s == nil || time.Since(s.at) > c.cfg.MaxAge || s.claims.byDevice == nil {
		return nil
	}
	var out []Owner
	for _, d := range devs {
		holders := s.claims.byDevice[d]
		if d.Pool == "" {
			holders = s.claims.byName[driverDevice{d.Driver, d.Device}]
		}
		for _, o := range holders {
			out = appendOwner(out, o)
		}
	}
	sortOwners(out)
	return out
}
