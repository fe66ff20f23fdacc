// Command metricstable writes the metric table of docs/reference/metrics.md
// (between <!-- metrics-table:start --> and <!-- metrics-table:end -->)
// from the receiver's metadata.yaml; make generate runs it, and
// make check-generated runs it with -check, which fails on a stale table.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/otelcol-nvml/otelcol-nvml/tools/metricstable/table"
)

func main() {
	metadata := flag.String("metadata", "receiver/nvmlreceiver/metadata.yaml", "the receiver's metadata.yaml")
	doc := flag.String("doc", "docs/reference/metrics.md", "the file holding the table between its markers")
	check := flag.Bool("check", false, "write nothing; fail when the table differs from what metadata.yaml gives")
	flag.Parse()
	if err := run(*metadata, *doc, *check); err != nil {
		fmt.Fprintln(os.Stderr, "metricstable:", err)
		os.Exit(1)
	}
}

func run(metadataPath, docPath string, check bool) error {
	md, err := os.ReadFile(metadataPath)
	if err != nil {
		return err
	}
	old, err := os.ReadFile(docPath)
	if err != nil {
		return err
	}
	updated, err := table.Rewrite(string(old), md)
	if err != nil {
		return fmt.Errorf("%s: %w", docPath, err)
	}
	if updated == string(old) {
		if check {
			fmt.Printf("%s: the metric table matches %s\n", docPath, metadataPath)
		}
		return nil
	}
	if check {
		return fmt.Errorf("%s: the metric table is out of date with %s: run 'make generate' and commit", docPath, metadataPath)
	}
	return os.WriteFile(docPath, []byte(updated), 0o644)
}
