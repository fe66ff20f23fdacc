// Package deploy checks what deploy/ ships against the official schemas:
// the Helm chart's rendered objects (k8s.io/api and the Prometheus
// Operator's types, decoded strictly), the collector configs they carry
// (otelcol-nvml validate), the alert rules against the chart's
// PrometheusRule, and the training-job recipe. It is its own module so that
// the Kubernetes and Grafana libraries stay out of the collector's build.
//
// Run with `make deploy-check`, or:
//
//	cd test/deploy && go test -count=1 . -helm=/abs/helm -otelcol=/abs/otelcol-nvml -fakenvml=/abs/libnvidia-ml.so.1
package deploy
