package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/viper"
)

// FuzzReadOslo: an oslo-style INI file of any content is read or refused
// with an error, never a panic; what is read lands under the keys the
// file named (lower-cased, [DEFAULT] at the top level).
func FuzzReadOslo(f *testing.F) {
	for _, s := range []string{
		"[DEFAULT]\ndebug = true\nauth_strategy = noauth2\n[database]\nconnection = sqlite:///x.db\n",
		"[placement_database]\nconnection = mysql+pymysql://u:p@h/db\nsync_on_startup = false\n",
		"[placement]\npolicy_mode = open\n[cors]\nallowed_origin = http://a, http://b\n",
		"[a.b]\nc.d = e\n[A]\nX = 1\nx = 2\n",
		"key = no section\n",
		"[unterminated\n",
		"[s]\nk = \"\"\"multi\nline\"\"\"\n",
		"[s]\nk\n",
		"",
	} {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data string) {
		file := filepath.Join(dir, "fuzz.conf")
		if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		v := viper.New()
		if err := readOslo(v, file); err != nil {
			return
		}
		for _, k := range v.AllKeys() {
			_ = v.Get(k)
		}
	})
}

// FuzzParsePolicySizes: any policy_sizes value is read or refused with
// an error naming the option, never a panic; what is read has vcpus and
// memory_mb of at least 1, no negative disk, no repeat, and reads back
// the same from its own formatting.
func FuzzParsePolicySizes(f *testing.F) {
	for _, s := range []string{"2:4096:20, 4:8192:40", "1:512:0", "2:4096", "0:1:1", ":::", "2:4096:20,,", "9223372036854775808:1:1", " 3 : 3 : 3 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		sizes, err := ParsePolicySizes([]string{data})
		if err != nil {
			if !strings.Contains(err.Error(), "policy_sizes") {
				t.Fatalf("error %q does not name the option", err)
			}
			return
		}
		var again []string
		for i, s := range sizes {
			if s.VCPUs < 1 || s.MemoryMB < 1 || s.DiskGB < 0 {
				t.Fatalf("%q read as %+v", data, s)
			}
			if slices.Contains(sizes[:i], s) {
				t.Fatalf("%q: %+v twice", data, s)
			}
			again = append(again, fmt.Sprintf("%d:%d:%d", s.VCPUs, s.MemoryMB, s.DiskGB))
		}
		back, err := ParsePolicySizes([]string{strings.Join(again, ", ")})
		if err != nil || !slices.Equal(back, sizes) {
			t.Fatalf("%q: %v read back as %v, %v", data, sizes, back, err)
		}
	})
}
