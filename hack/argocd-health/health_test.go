package argocdhealth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The resource customizations, in Argo CD's layout: <group>/<Kind>/health.lua,
// health_test.yaml and testdata/.
const customizations = "../../config/argocd/resource_customizations"

type healthTests struct {
	Tests []struct {
		HealthStatus HealthStatus `json:"healthStatus"`
		InputPath    string       `json:"inputPath"`
	} `json:"tests"`
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func TestHealthScripts(t *testing.T) {
	scripts, err := filepath.Glob(filepath.Join(customizations, "*", "*", "health.lua"))
	if err != nil {
		t.Fatal(err)
	}
	if len(scripts) == 0 {
		t.Fatalf("no health.lua under %s", customizations)
	}
	for _, scriptPath := range scripts {
		dir := filepath.Dir(scriptPath)
		name, _ := filepath.Rel(customizations, dir)
		t.Run(name, func(t *testing.T) {
			source, err := os.ReadFile(scriptPath)
			if err != nil {
				t.Fatal(err)
			}
			uses, err := LibraryUses(string(source))
			if err != nil {
				t.Fatal(err)
			}
			if len(uses) > 0 {
				t.Errorf("%s uses what argocd-cm scripts lack (only base, table and package are open): %s", scriptPath, strings.Join(uses, "; "))
			}

			var cases healthTests
			readYAML(t, filepath.Join(dir, "health_test.yaml"), &cases)
			if len(cases.Tests) == 0 {
				t.Fatalf("%s/health_test.yaml has no tests", dir)
			}
			used := map[string]bool{}
			for _, c := range cases.Tests {
				used[filepath.Clean(c.InputPath)] = true
				t.Run(c.InputPath, func(t *testing.T) {
					var obj map[string]any
					readYAML(t, filepath.Join(dir, c.InputPath), &obj)
					got, err := Run(string(source), obj)
					if err != nil {
						t.Fatalf("the script failed: %v", err)
					}
					if got != c.HealthStatus {
						t.Errorf("got  %+v\nwant %+v", got, c.HealthStatus)
					}
				})
			}
			testdata, err := filepath.Glob(filepath.Join(dir, "testdata", "*.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			for _, file := range testdata {
				rel, _ := filepath.Rel(dir, file)
				if !used[rel] {
					t.Errorf("%s is not the inputPath of any test in health_test.yaml", rel)
				}
			}
		})
	}
}

// The libraries an argocd-cm script lacks really are absent: a script that calls one fails,
// both when run and when read.
func TestOnlyBaseTableAndPackage(t *testing.T) {
	obj := map[string]any{"status": map[string]any{"phase": "Ready", "conditions": []any{map[string]any{"type": "Ready"}}}}
	for _, script := range []string{
		`return {status = string.upper("healthy")}`,
		`local s = obj.status.phase; if s:find("Re") then return {status = "Healthy"} end`,
		`return {status = "Healthy", message = tostring(math.floor(1.5))}`,
		`return {status = "Healthy", message = tostring(os.time())}`,
		`io.write("x"); return {status = "Healthy"}`,
	} {
		if got, err := Run(script, obj); err == nil {
			t.Errorf("%s: ran (%+v); want an error, as in Argo CD", script, got)
		}
		if uses, err := LibraryUses(script); err != nil || len(uses) == 0 {
			t.Errorf("%s: LibraryUses = %v, %v; want the use reported", script, uses, err)
		}
	}
	// What they do have: base (ipairs, tostring, pairs), table, package (require).
	got, err := Run(`
		local names = {}
		for _, c in ipairs(obj.status.conditions) do table.insert(names, c.type) end
		assert(type(require) == "function")
		return {status = "Healthy", message = table.concat(names, ",") .. tostring(#names)}`, obj)
	if err != nil || got != (HealthStatus{Status: "Healthy", Message: "Ready1"}) {
		t.Errorf("base, table and package: got %+v, %v", got, err)
	}
	uses, err := LibraryUses("local x = 1\nreturn {status = string.upper(\"healthy\")}")
	if err != nil || strings.Join(uses, "; ") != "line 2: string" {
		t.Errorf("LibraryUses: got %v, %v; want [line 2: string]", uses, err)
	}
	if uses, err := LibraryUses(`local t = {}; table.insert(t, 1); return {status = tostring(#t)}`); err != nil || len(uses) != 0 {
		t.Errorf("table and base are allowed: got %v, %v", uses, err)
	}
}

// Argo CD turns a status it does not know into Unknown, and refuses a non-table result.
func TestResultShape(t *testing.T) {
	got, err := Run(`return {status = "Fine", message = "x"}`, nil)
	if err != nil || got != (HealthStatus{Status: "Unknown", Message: InvalidHealthStatus}) {
		t.Errorf("unknown status: got %+v, %v", got, err)
	}
	if _, err := Run(`return "Healthy"`, nil); err == nil {
		t.Error("a string result: want an error")
	}
	if _, err := Run(`return {status = "Healthy", message = 3}`, nil); err == nil {
		t.Error("a numeric message: want an error")
	}
}
