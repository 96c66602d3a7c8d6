package config

import (
	"fmt"
	"strings"

	"github.com/spf13/viper"
	"gopkg.in/ini.v1"
)

// codecRegistry is viper's default registry; INI is handled by readOslo
// because viper 1.20+ no longer ships an INI codec.
func codecRegistry() *viper.DefaultCodecRegistry { return viper.NewCodecRegistry() }

// readOslo reads an oslo.config-style INI file. [DEFAULT] keys become
// top-level keys, other sections nest (section.key), and the oslo names of
// the settings we share with placement.conf/blazar.conf are translated.
func readOslo(v *viper.Viper, file string) error {
	f, err := ini.LoadSources(ini.LoadOptions{AllowShadows: true, Insensitive: true}, file)
	if err != nil {
		return fmt.Errorf("config file %s: %w", file, err)
	}
	m := map[string]any{}
	for _, sec := range f.Sections() {
		name := strings.ToLower(sec.Name())
		for _, k := range sec.Keys() {
			key := strings.ToLower(k.Name())
			full := name + "." + key
			if name == ini.DefaultSection || name == "default" {
				full = "default." + key
			}
			val := k.String()
			if alias, ok := osloAliases[full]; ok {
				if full == "default.debug" {
					if strings.EqualFold(val, "true") {
						val = "debug"
					} else {
						continue
					}
				}
				if alias == "auth" && val == "noauth2" {
					val = "noauth"
				}
				setNested(m, alias, val)
				continue
			}
			full = strings.TrimPrefix(full, "default.")
			setNested(m, full, val)
		}
	}
	return v.MergeConfigMap(m)
}

func setNested(m map[string]any, key, val string) {
	parts := strings.Split(key, ".")
	for _, p := range parts[:len(parts)-1] {
		sub, ok := m[p].(map[string]any)
		if !ok {
			sub = map[string]any{}
			m[p] = sub
		}
		m = sub
	}
	m[parts[len(parts)-1]] = val
}
