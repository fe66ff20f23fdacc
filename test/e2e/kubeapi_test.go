//go:build e2e

package e2e

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"flag"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	resourcev1 "k8s.io/client-go/kubernetes/typed/resource/v1"
	"k8s.io/client-go/rest"

	"github.com/otelcol-nvml/otelcol-nvml/test/testutil"
)

var (
	kubeAPIServerPath = flag.String("kube-apiserver", "", "path of a kube-apiserver binary (make kubeapi builds one into _build/kubeapi); empty: the DRA tests are skipped")
	etcdPath          = flag.String("etcd", "", "path of an etcd binary (make kubeapi builds one into _build/kubeapi)")
)

// The API server's users (its token file): an admin (system:masters), and a
// user with no RBAC rule at all, as a collector without the chart's
// ClusterRole.
const (
	adminToken  = "e2e-admin-token"
	nobodyToken = "e2e-nobody-token"
)

// kubeAPI is a real kube-apiserver on a real etcd, on loopback.
type kubeAPI struct {
	url string
	dir string
}

// startKubeAPI starts etcd and kube-apiserver, and waits for readyz.
func startKubeAPI(t *testing.T) *kubeAPI {
	t.Helper()
	if *kubeAPIServerPath == "" || *etcdPath == "" {
		t.Skip("no -kube-apiserver and -etcd (make kubeapi builds them; make e2e passes them)")
	}
	apiserver := testutil.AbsFlag(t, "kube-apiserver", *kubeAPIServerPath)
	etcd := testutil.AbsFlag(t, "etcd", *etcdPath)
	dir := t.TempDir()
	clientPort, peerPort := testutil.FreePort(t), testutil.FreePort(t)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	etcdProc := startProcess(t, "etcd", nil, etcd, "--data-dir="+filepath.Join(dir, "etcd"), "--name=e2e",
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL, "--initial-cluster=e2e="+peerURL,
		"--log-level=warn")

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	saKey := writeFile(t, dir, "sa.key", string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})))
	saPub := writeFile(t, dir, "sa.pub", string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})))
	tokens := writeFile(t, dir, "tokens.csv", adminToken+`,admin,1,"system:masters"`+"\n"+nobodyToken+",nobody,2\n")
	port := testutil.FreePort(t)
	api := &kubeAPI{url: fmt.Sprintf("https://127.0.0.1:%d", port), dir: dir}
	apiProc := startProcess(t, "kube-apiserver", nil, apiserver,
		"--etcd-servers="+etcdURL, fmt.Sprintf("--secure-port=%d", port), "--bind-address=127.0.0.1",
		"--cert-dir="+filepath.Join(dir, "certs"),
		"--service-account-issuer=https://kubernetes.default.svc", "--service-account-key-file="+saPub,
		"--service-account-signing-key-file="+saKey, "--token-auth-file="+tokens,
		"--authorization-mode=RBAC", "--service-cluster-ip-range=10.0.0.0/24")
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	waitFor(t, 90*time.Second, "kube-apiserver's readyz", func() bool {
		req, _ := http.NewRequest(http.MethodGet, api.url+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, etcdProc, apiProc)
	return api
}

// kubeconfig writes a kubeconfig for the user of token and returns its path.
func (k *kubeAPI) kubeconfig(t *testing.T, name, token string) string {
	t.Helper()
	return writeFile(t, k.dir, name+".kubeconfig", fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: %s
  user:
    token: %s
contexts:
- name: e2e
  context: {cluster: e2e, user: %s}
current-context: e2e
`, k.url, name, token, name))
}

// resourceClient is the admin's resource.k8s.io/v1 client.
func (k *kubeAPI) resourceClient(t *testing.T) *resourcev1.ResourceV1Client {
	t.Helper()
	c, err := resourcev1.NewForConfig(&rest.Config{Host: k.url, BearerToken: adminToken, TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
