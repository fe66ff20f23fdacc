//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"gopkg.in/yaml.v3"
)

// everySecond copies each rule file into dir without its groups' own
// intervals: the tests' Prometheus evaluates every group at its
// evaluation_interval of one second, where a group's own (the 24h
// figures' dayInterval, minutes) would leave its records empty for most
// of a test.
func everySecond(t *testing.T, dir string, ruleFiles []string) []string {
	t.Helper()
	out := make([]string, 0, len(ruleFiles))
	for i, path := range ruleFiles {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var file struct {
			Groups []map[string]any `yaml:"groups"`
		}
		if err := yaml.Unmarshal(data, &file); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, g := range file.Groups {
			delete(g, "interval")
		}
		data, err = yaml.Marshal(file)
		if err != nil {
			t.Fatal(err)
		}
		copyPath := filepath.Join(dir, filepath.Base(path)+"."+string(rune('a'+i))+".yaml")
		if err := os.WriteFile(copyPath, data, 0o644); err != nil {
			t.Fatal(err)
		}
		out = append(out, copyPath)
	}
	return out
}
