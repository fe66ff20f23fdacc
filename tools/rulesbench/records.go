package main

import (
	"log"
	"os"
	"regexp"

	"gopkg.in/yaml.v3"
)

// selectRecords writes the recording rules of the rule file whose names
// match re into out, one group, for promtool's rule backfill; it returns
// how many. A rule that reads another record gets none of its history
// (promtool backfills each rule from the raw series alone).
func selectRecords(rules, re, out string) int {
	data, err := os.ReadFile(rules)
	if err != nil {
		log.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []map[string]any `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		log.Fatal(err)
	}
	match := regexp.MustCompile(re)
	var picked []map[string]any
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if name, ok := r["record"].(string); ok && match.MatchString(name) {
				picked = append(picked, r)
			}
		}
	}
	if len(picked) == 0 {
		return 0
	}
	outData, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "backfill", "rules": picked}}})
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(out, outData, 0o644); err != nil {
		log.Fatal(err)
	}
	return len(picked)
}
