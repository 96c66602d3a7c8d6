package config

import "fmt"

// Ownership holds the [ownership] section (the ownership policy
// extension, /v1/ownership).
type Ownership struct {
	// RedistributeInterval is how often, in seconds, the ownership is
	// recomputed from the stored one to hand free owned hosts to the
	// consumers short of their ownership, by rank (the seed's periodic
	// redistribution); a plan write or a host change restarts the wait.
	// 0 never redistributes on a timer.
	RedistributeInterval int `mapstructure:"redistribute_interval"`
}

func init() {
	defaults["ownership.redistribute_interval"] = 300
}

func (o Ownership) check() error {
	if o.RedistributeInterval < 0 {
		return fmt.Errorf("config: ownership.redistribute_interval %d: want seconds, or 0 to never redistribute on a timer", o.RedistributeInterval)
	}
	return nil
}
