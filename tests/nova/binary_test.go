package nova_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	buildOnce sync.Once
	buildDir  string
	binPath   string
	buildErr  error
)

// leaseholdBinary builds cmd/leasehold once per test run (the kill test
// needs a process boundary).
func leaseholdBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "leasehold-nova-")
		if err != nil {
			buildErr = err
			return
		}
		buildDir = dir
		binPath = filepath.Join(dir, "leasehold")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/leasehold/leasehold/cmd/leasehold").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}
