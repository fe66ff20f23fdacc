// gendashboard writes the otelcol-nvml Grafana dashboard (make dashboard).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/otelcol-nvml/otelcol-nvml/test/deploy/dashboard"
)

func main() {
	out := flag.String("o", "", "output file (default: stdout)")
	flag.Parse()
	data, err := dashboard.JSON()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gendashboard:", err)
		os.Exit(1)
	}
	if *out == "" {
		_, err = os.Stdout.Write(data)
	} else {
		err = os.WriteFile(*out, data, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gendashboard:", err)
		os.Exit(1)
	}
}
