package iallocator

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden hail answers in testdata/ from the real hail")

// hailPath finds Ganeti's hail (Debian package ganeti-htools).
func hailPath() string {
	for _, p := range []string{"/usr/lib/ganeti/iallocators/hail", "/usr/lib/ganeti/3.0/usr/lib/ganeti/iallocators/hail"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("hail"); err == nil {
		return p
	}
	return ""
}

// needHail returns hail's path, or skips the test loudly (fails if
// LEASEHOLD_REQUIRE_HAIL=1).
func needHail(t testing.TB) string {
	t.Helper()
	p := hailPath()
	if p == "" {
		msg := "\n*** hail NOT FOUND: differential tests against Ganeti's hail are SKIPPED.\n" +
			"*** Install it with: apt-get install -y ganeti-htools\n"
		if os.Getenv("LEASEHOLD_REQUIRE_HAIL") == "1" {
			t.Fatal(msg + "*** LEASEHOLD_REQUIRE_HAIL=1 is set, so this is a failure.")
		}
		t.Skip(msg)
	}
	return p
}

// runHail runs hail on a request file.
func runHail(t testing.TB, hail, file string, args ...string) string {
	t.Helper()
	cmd := exec.Command(hail, append(args, file)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("hail %s: %v\n%s", file, err, errb.String())
	}
	return strings.TrimSpace(out.String())
}

// runOurs runs Leasehold's iallocator on a request.
func runOurs(t testing.TB, data []byte, opts Options) string {
	t.Helper()
	var out bytes.Buffer
	if err := RunWithOptions(bytes.NewReader(data), &out, opts); err != nil {
		t.Fatalf("Run: %v", err)
	}
	return strings.TrimSpace(out.String())
}

var scoreRE = regexp.MustCompile(`score: (-?[0-9]+\.[0-9]+)`)

type answer struct {
	Success bool            `json:"success"`
	Info    string          `json:"info"`
	Result  json.RawMessage `json:"result"`
}

// sameAnswer compares two answers: same success flag, same result, same
// info text except that normal-metric scores may differ by 1e-6.
func sameAnswer(want, got string) error {
	var a, b answer
	if err := json.Unmarshal([]byte(want), &a); err != nil {
		return fmt.Errorf("bad hail answer %q: %v", want, err)
	}
	if err := json.Unmarshal([]byte(got), &b); err != nil {
		return fmt.Errorf("bad answer %q: %v", got, err)
	}
	if a.Success != b.Success {
		return fmt.Errorf("success: hail %v, ours %v\nhail: %s\nours: %s", a.Success, b.Success, want, got)
	}
	var ra, rb any
	_ = json.Unmarshal(a.Result, &ra)
	_ = json.Unmarshal(b.Result, &rb)
	if d := cmp.Diff(ra, rb); d != "" {
		return fmt.Errorf("result differs (-hail +ours):\n%s\nhail: %s\nours: %s", d, want, got)
	}
	sa, sb := scoreRE.FindAllStringSubmatch(a.Info, -1), scoreRE.FindAllStringSubmatch(b.Info, -1)
	if len(sa) != len(sb) {
		return fmt.Errorf("info differs:\nhail: %s\nours: %s", a.Info, b.Info)
	}
	for i := range sa {
		x, _ := strconv.ParseFloat(sa[i][1], 64)
		y, _ := strconv.ParseFloat(sb[i][1], 64)
		if math.Abs(x-y) > 1e-6 {
			return fmt.Errorf("score %v vs %v:\nhail: %s\nours: %s", x, y, a.Info, b.Info)
		}
	}
	if scoreRE.ReplaceAllString(a.Info, "score: X") != scoreRE.ReplaceAllString(b.Info, "score: X") {
		return fmt.Errorf("info differs:\nhail: %s\nours: %s", a.Info, b.Info)
	}
	return nil
}

// diffCase is one request compared with hail.
type diffCase struct {
	name string
	data []byte
	args []string // hail flags; mapped onto Options
}

func (dc *diffCase) options() Options {
	var o Options
	for _, a := range dc.args {
		switch {
		case a == "--no-capacity-checks":
			o.Alloc.NoCapacityChecks = true
		case strings.HasPrefix(a, "--restrict-allocation-to="):
			o.Alloc.RestrictTo = strings.Split(strings.TrimPrefix(a, "--restrict-allocation-to="), ",")
		}
	}
	return o
}

// checkGolden compares our answer with the golden hail answer in
// testdata (and, when hail is installed, the golden file with hail).
func checkGolden(t *testing.T, dc diffCase) {
	t.Helper()
	reqFile := filepath.Join("testdata", dc.name+".json")
	ansFile := filepath.Join("testdata", dc.name+".hail")
	if *update {
		hail := needHail(t)
		if err := os.WriteFile(reqFile, dc.data, 0o644); err != nil {
			t.Fatal(err)
		}
		ans := runHail(t, hail, reqFile, dc.args...)
		if err := os.WriteFile(ansFile, []byte(ans+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(ansFile)
	if err != nil {
		t.Fatalf("golden answer missing (run with -update and hail installed): %v", err)
	}
	got := runOurs(t, dc.data, dc.options())
	if err := sameAnswer(string(want), got); err != nil {
		t.Error(err)
	}
}

// checkLive runs hail and ours on the same request.
func checkLive(t testing.TB, hail string, dir string, dc diffCase) error {
	f := filepath.Join(dir, dc.name+".json")
	if err := os.WriteFile(f, dc.data, 0o644); err != nil {
		return err
	}
	want := runHail(t, hail, f, dc.args...)
	got := runOurs(t, dc.data, dc.options())
	if err := sameAnswer(want, got); err != nil {
		return fmt.Errorf("%s (%s): %w", dc.name, f, err)
	}
	return nil
}

// runLiveParallel checks many cases against hail, two hail processes at a
// time, and reports every mismatch.
func runLiveParallel(t *testing.T, cases []diffCase) {
	hail := needHail(t)
	dir := t.TempDir()
	if d := os.Getenv("LEASEHOLD_KEEP_CASES"); d != "" {
		dir = d
	}
	var mu sync.Mutex
	var fails []string
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for _, dc := range cases {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := checkLive(t, hail, dir, dc); err != nil {
				mu.Lock()
				fails = append(fails, err.Error())
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, f := range fails {
		if len(f) > 3000 && os.Getenv("LEASEHOLD_FULL_DIFF") == "" {
			f = f[:3000] + "…(truncated; LEASEHOLD_FULL_DIFF=1 shows all)"
		}
		t.Error(f)
	}
	t.Logf("%d cases compared with hail, %d mismatches", len(cases), len(fails))
}
