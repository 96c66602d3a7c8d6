package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestRunCommands(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
		wantOut string
	}{
		{"version", []string{"version"}, "", "leasehold "},
		{"help", []string{"help"}, "", "leasehold serve"},
		{"no command", nil, "no command given", ""},
		{"unknown", []string{"frobnicate"}, `unknown command "frobnicate"`, ""},
		{"db without sync", []string{"db"}, `needs the subcommand "sync"`, ""},
		{"serve bad flag", []string{"serve", "--no-such-flag"}, "unknown flag", ""},
		{"serve bad auth", []string{"serve", "--auth", "kerberos"}, `auth "kerberos" is not supported`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := run(tc.args, strings.NewReader(""), &out, &errb)
			if tc.wantErr == "" && err != nil {
				t.Fatalf("run(%q) = %v", tc.args, err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("run(%q) error = %v, want %q", tc.args, err, tc.wantErr)
			}
			if !strings.Contains(out.String(), tc.wantOut) {
				t.Errorf("output %q does not contain %q", out.String(), tc.wantOut)
			}
		})
	}
}

// TestIAllocatorMatchesHail runs a recorded hail case through the command.
func TestIAllocatorMatchesHail(t *testing.T) {
	const dir = "../../pkg/allocator/iallocator/testdata/"
	want, err := os.ReadFile(dir + "a1-dedicated-quarter.hail")
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := iallocatorCmd([]string{dir + "a1-dedicated-quarter.json"}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if strings.TrimSpace(out.String()) != strings.TrimSpace(string(want)) {
		t.Errorf("answer differs from hail's:\n got %s\nwant %s", out.String(), want)
	}
	out.Reset()
	errb.Reset()
	if code := iallocatorCmd([]string{"-"}, strings.NewReader("{"), &out, &errb); code != 1 || !strings.HasPrefix(errb.String(), "Error: ") {
		t.Errorf("malformed request: exit %d, stderr %q; want 1 and an Error: line", code, errb.String())
	}
}

// TestFailClosedDefault: with no auth strategy named anywhere, serve
// means keystone and refuses to start without [keystone_authtoken]
// (before it opens the database), while db sync needs none of it.
func TestFailClosedDefault(t *testing.T) {
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "LEASEHOLD_") {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
	dir := t.TempDir()
	var out, errb bytes.Buffer
	err := run([]string{"serve", "--listen", "127.0.0.1:0", "--database", "sqlite:///" + dir + "/serve.db"}, strings.NewReader(""), &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "auth_strategy = keystone needs these [keystone_authtoken] options") {
		t.Errorf("serve with no auth strategy: %v, want the refusal naming [keystone_authtoken]", err)
	}
	if _, err := os.Stat(dir + "/serve.db"); err == nil {
		t.Error("serve opened the database before refusing its auth configuration")
	}
	if err := run([]string{"db", "sync", "--database", "sqlite:///" + dir + "/sync.db"}, strings.NewReader(""), &out, &errb); err != nil {
		t.Errorf("db sync with no auth strategy: %v", err)
	}
	if st, err := os.Stat(dir + "/sync.db"); err != nil || st.Size() == 0 {
		t.Errorf("db sync wrote no database: %v", err)
	}
}
