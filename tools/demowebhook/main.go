// Command demowebhook is make demo's notification log: an Alertmanager
// webhook receiver on 127.0.0.1 that prints each notification it gets, one
// block per alert (the receiver, firing or resolved, the alert, its holder
// and GPU, the summary, the advice and the runbook), to its standard output:
// the demo's terminal. It is a demo tool; a real site points Alertmanager's
// receivers at its mail, chat or paging (deploy/alertmanager/alertmanager.yml).
//
//	demowebhook -listen 127.0.0.1:9095
//
// It serves until SIGINT or SIGTERM.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9095", "the address to serve the webhook on")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: demowebhook [-listen HOST:PORT]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demowebhook:", err)
		os.Exit(1)
	}
	srv := &http.Server{Handler: handler(os.Stdout), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "demowebhook:", err)
		os.Exit(1)
	}
}

// message is the part of Alertmanager's webhook payload (version 4) shown.
type message struct {
	Receiver string  `json:"receiver"`
	Status   string  `json:"status"`
	Alerts   []alert `json:"alerts"`
}

type alert struct {
	Status      string            `json:"status"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// handler prints each notification POSTed to it to w.
func handler(w io.Writer) http.Handler {
	var mu sync.Mutex
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(rw, "POST an Alertmanager webhook notification", http.StatusMethodNotAllowed)
			return
		}
		var m message
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&m); err != nil {
			http.Error(rw, "not an Alertmanager webhook notification: "+err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprint(w, format(m))
	})
}

// format writes one block per alert of a notification.
func format(m message) string {
	var b strings.Builder
	for _, a := range m.Alerts {
		l := a.Labels
		fmt.Fprintf(&b, "demo: notification to %s: %s %s", m.Receiver, strings.ToUpper(a.Status), l["alertname"])
		if h := holder(l); h != "" {
			fmt.Fprintf(&b, ", %s", h)
		}
		if l["hw_id"] != "" {
			fmt.Fprintf(&b, ", GPU %s", l["hw_id"])
		}
		b.WriteString("\n")
		for _, k := range []string{"summary", "description", "advice", "runbook_url"} {
			if v := strings.TrimSpace(a.Annotations[k]); v != "" {
				fmt.Fprintf(&b, "  %s: %s\n", k, strings.ReplaceAll(v, "\n", "\n    "))
			}
		}
	}
	return b.String()
}

// holder names the holder from the routing labels that are set.
func holder(l map[string]string) string {
	var parts []string
	if l["k8s_pod_name"] != "" {
		parts = append(parts, "pod "+l["k8s_namespace_name"]+"/"+l["k8s_pod_name"])
	} else if l["k8s_namespace_name"] != "" {
		parts = append(parts, "namespace "+l["k8s_namespace_name"])
	}
	for _, k := range [][2]string{{"k8s_resourceclaim_name", "claim"}, {"container_id", "container"},
		{"slurm_job_id", "Slurm job"}, {"process_owner", "user"}} {
		if v := l[k[0]]; v != "" {
			parts = append(parts, k[1]+" "+v)
		}
	}
	return strings.Join(parts, ", ")
}
