// Package nvmlreceiver reads NVIDIA GPU state through NVML and emits it as
// OTLP metrics, one resource per GPU.
//
// The receiver never talks to NVML itself: internal/nvmlclient does, through
// an injected nvml.Interface. This package turns its samples into pdata with
// the metrics builder that mdatagen generates from metadata.yaml.
package nvmlreceiver // import "github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver"
