package main

import (
	"log"
	"os"
	"regexp"

	"gopkg.in/yaml.v3"
)

// selectRecords writes the recording rules of the rule file whose names
// match re into out, each in a group with its own group's interval (which
// promtool's rule backfill evaluates it at, as Prometheus would have), and
// returns their names. A rule that reads another record gets none of its
// history (promtool backfills each rule from the raw series alone).
func selectRecords(rules, re, out string) []string {
	data, err := os.ReadFile(rules)
	if err != nil {
		log.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Name     string           `yaml:"name"`
			Interval string           `yaml:"interval,omitempty"`
			Rules    []map[string]any `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		log.Fatal(err)
	}
	match := regexp.MustCompile(re)
	var groups []any
	var names []string
	for _, g := range file.Groups {
		var picked []map[string]any
		for _, r := range g.Rules {
			if name, ok := r["record"].(string); ok && match.MatchString(name) {
				picked = append(picked, r)
				names = append(names, name)
			}
		}
		if len(picked) == 0 {
			continue
		}
		out := map[string]any{"name": g.Name, "rules": picked}
		if g.Interval != "" {
			out["interval"] = g.Interval
		}
		groups = append(groups, out)
	}
	if len(names) == 0 {
		return nil
	}
	outData, err := yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(out, outData, 0o644); err != nil {
		log.Fatal(err)
	}
	return names
}
