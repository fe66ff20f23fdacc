package main

import (
	"log"
	"os"
	"time"

	"gopkg.in/yaml.v3"
)

// defaultInterval is how often Prometheus evaluates a group without its
// own interval at its default global evaluation_interval (1m).
const defaultInterval = time.Minute

// groupIntervals reads each group's own interval from the rule file (the
// default for a group without one) and writes the file again without
// them into out: the bench evaluates every group every few seconds, since
// an evaluation costs the same at any interval, and the report weighs
// each group by how often it really runs.
func groupIntervals(rules, out string) map[string]time.Duration {
	data, err := os.ReadFile(rules)
	if err != nil {
		log.Fatal(err)
	}
	var file struct {
		Groups []map[string]any `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		log.Fatal(err)
	}
	intervals := map[string]time.Duration{}
	for _, g := range file.Groups {
		name, _ := g["name"].(string)
		intervals[name] = defaultInterval
		if s, ok := g["interval"].(string); ok {
			d, err := time.ParseDuration(s)
			if err != nil {
				log.Fatalf("%s: group %s: interval %q: %v", rules, name, s, err)
			}
			intervals[name] = d
			delete(g, "interval")
		}
	}
	outData, err := yaml.Marshal(file)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(out, outData, 0o644); err != nil {
		log.Fatal(err)
	}
	return intervals
}
