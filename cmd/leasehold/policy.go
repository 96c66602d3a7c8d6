package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/leasehold/leasehold/pkg/metrics"
	"github.com/leasehold/leasehold/pkg/policy"
)

const policyUsage = `usage:
  leasehold policy sample    print every policy rule with its default, description and operations
`

// policyCmd runs "leasehold policy ...".
func policyCmd(args []string, stdout, stderr io.Writer) error {
	if len(args) != 1 || args[0] != "sample" {
		fmt.Fprint(stderr, policyUsage)
		return errors.New(`"policy" needs the subcommand "sample"`)
	}
	return writePolicySample(stdout)
}

// writePolicySample writes etc/policy.yaml.sample: both APIs' rules and
// the /metrics rule.
func writePolicySample(w io.Writer) error {
	return policy.WriteSample(w,
		policy.Section{Title: "Blazar (reservation) API, /v1", Rules: policy.BlazarRules(),
			NewDefaults: "[oslo_policy] enforce_new_defaults is true (the default)"},
		policy.Section{Title: "Ownership policy (Leasehold extension), /v1/ownership", Rules: policy.OwnershipRules(),
			NewDefaults: "[oslo_policy] enforce_new_defaults is true (the default)"},
		policy.Section{Title: "Placement API", Rules: policy.PlacementRules(),
			NewDefaults: "[placement] policy_mode is secure (legacy is the default)"},
		policy.Section{Title: "Metrics on the main listener ([metrics] on_main)", Rules: []policy.Rule{metrics.PolicyRule()},
			NewDefaults: "[oslo_policy] enforce_new_defaults is true (the default)"},
	)
}
