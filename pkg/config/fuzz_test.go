package config

import (
	"os"
	"path/filepath"
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
