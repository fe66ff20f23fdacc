// Command rulesrender turns the chart's PrometheusRule, as `helm template`
// renders it with your values, into a plain Prometheus rules file (the
// PrometheusRule's spec: its groups), for a Prometheus without the
// Prometheus Operator: `make rules-render VALUES=my-values.yaml` (no cluster
// needed). It reads the rendering on stdin and writes the rules file on
// stdout.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"gopkg.in/yaml.v3"
)

func main() {
	values := flag.String("values", "", "the values files the rendering used, for the output's header")
	flag.Parse()
	in, err := io.ReadAll(os.Stdin)
	if err == nil {
		var out []byte
		if out, err = render(in, *values); err == nil {
			_, err = os.Stdout.Write(out)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rulesrender:", err)
		os.Exit(1)
	}
}

// render returns the rules file of the one PrometheusRule in stream.
func render(stream []byte, values string) ([]byte, error) {
	dec := yaml.NewDecoder(bytes.NewReader(stream))
	var spec *yaml.Node
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("the rendering is not YAML: %w", err)
		}
		if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
			continue // a document of comments only
		}
		root := doc.Content[0]
		if kind := lookup(root, "kind"); kind == nil || kind.Value != "PrometheusRule" {
			continue
		}
		if spec != nil {
			return nil, errors.New("the rendering has more than one PrometheusRule")
		}
		if spec = lookup(root, "spec"); spec == nil || spec.Kind != yaml.MappingNode {
			return nil, errors.New("the PrometheusRule has no spec")
		}
	}
	if spec == nil {
		return nil, errors.New("the rendering has no PrometheusRule: is prometheusRule.enabled set?")
	}
	// A rules file holds groups and nothing else: promtool refuses any
	// other key.
	for i := 0; i < len(spec.Content); i += 2 {
		if k := spec.Content[i].Value; k != "groups" {
			return nil, fmt.Errorf("the PrometheusRule's spec has %q, which a rules file cannot hold", k)
		}
	}
	groups := lookup(spec, "groups")
	if groups == nil || groups.Kind != yaml.SequenceNode || len(groups.Content) == 0 {
		return nil, errors.New("the PrometheusRule has no rule groups: is prometheusRule.enabled set?")
	}

	var out bytes.Buffer
	out.WriteString("# otelcol-nvml's Prometheus rules, rendered from the chart deploy/helm/otelcol-nvml\n")
	if values != "" {
		fmt.Fprintf(&out, "# with %s\n", strings.Join(strings.Fields(values), ", "))
	}
	out.WriteString("# by `make rules-render` (tools/rulesrender). Do not edit: change the values\n" +
		"# and render again. Check: promtool check rules <this file>.\n")
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(spec); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	// Read it back as a rules file's groups, each named: what promtool and
	// Prometheus will read first.
	var file struct {
		Groups []map[string]any `yaml:"groups"`
	}
	if err := yaml.Unmarshal(out.Bytes(), &file); err != nil {
		return nil, fmt.Errorf("the PrometheusRule's groups are not rule groups: %w", err)
	}
	for i, g := range file.Groups {
		if name, ok := g["name"].(string); !ok || name == "" {
			return nil, fmt.Errorf("the PrometheusRule's group %d has no name", i+1)
		}
	}
	return out.Bytes(), nil
}

// lookup returns the value of key in a mapping node, nil when absent.
func lookup(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}
