package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/pkg/metrics"
	"github.com/leasehold/leasehold/pkg/policy"
)

var updateSample = flag.Bool("update", false, "rewrite etc/policy.yaml.sample from `leasehold policy sample`")

var policySamplePath = filepath.Join("..", "..", "etc", "policy.yaml.sample")

// TestPolicySampleIsCurrent: etc/policy.yaml.sample is what `leasehold
// policy sample` prints (go test ./cmd/leasehold -run PolicySample
// -update rewrites it).
func TestPolicySampleIsCurrent(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run([]string{"policy", "sample"}, nil, &out, &errOut); err != nil {
		t.Fatalf("policy sample: %v (%s)", err, errOut.String())
	}
	if *updateSample {
		if err := os.WriteFile(policySamplePath, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	shipped, err := os.ReadFile(policySamplePath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(shipped, out.Bytes()) {
		t.Errorf("%s is not current: run go test ./cmd/leasehold -run PolicySample -update", policySamplePath)
	}
}

// TestPolicySampleContent: every rule appears commented out with its
// default, and uncommenting the whole sample gives a policy file that
// loads and changes no decision of either API.
func TestPolicySampleContent(t *testing.T) {
	var out bytes.Buffer
	if err := writePolicySample(&out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	var uncommented strings.Builder
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, `#"`) {
			uncommented.WriteString(line[1:] + "\n")
		}
	}
	all := append(append(append(policy.BlazarRules(), policy.OwnershipRules()...), policy.PlacementRules()...), metrics.PolicyRule())
	flat := strings.ReplaceAll(text, "\n# ", " ") // comments are wrapped
	for _, r := range all {
		if !strings.Contains(flat, r.Description) {
			t.Errorf("rule %s: description missing", r.Name)
		}
		for _, op := range r.Operations {
			if !strings.Contains(text, op.Path) {
				t.Errorf("rule %s: operation %s %s missing", r.Name, op.Method, op.Path)
			}
		}
	}
	f, err := policy.ParseFile("sample", []byte(uncommented.String()))
	if err != nil {
		t.Fatal(err)
	}
	// project_reader_api is in both sections with the same check.
	if got, want := len(f.Rules), len(all)-1; got != want {
		t.Errorf("%d rules uncommented, want %d", got, want)
	}
	for _, r := range all {
		if fr, ok := f.Rules[r.Name]; !ok || fr.Check != r.Check {
			t.Errorf("rule %s: sample has %q, default %q", r.Name, fr.Check, r.Check)
		}
	}
}

func TestPolicyCommandUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	for _, args := range [][]string{{"policy"}, {"policy", "samples"}, {"policy", "sample", "x"}} {
		if err := run(args, nil, &out, &errOut); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
	if !strings.Contains(errOut.String(), "leasehold policy sample") {
		t.Errorf("usage not printed: %q", errOut.String())
	}
}
