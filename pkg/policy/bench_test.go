package policy

import "testing"

// BenchmarkEnforce is the per-request cost of a policy decision: Blazar's
// lease read (four rules deep, implied roles expanded) and a Placement
// read in legacy mode (new default or the deprecated role:admin).
func BenchmarkEnforce(b *testing.B) {
	blazar, err := New(BlazarRules(), Options{EnforceNewDefaults: true, ImpliedRoles: BlazarImpliedRoles(), DefaultRule: BlazarDefaultRule})
	if err != nil {
		b.Fatal(err)
	}
	placement, err := New(PlacementRules(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	member := &Credentials{UserID: "u", ProjectID: "p1", Roles: []string{"member"}}
	admin := &Credentials{UserID: "a", ProjectID: "admin", Roles: []string{"admin"}, IsAdmin: true}
	target := Target{"project_id": "p1"}
	for _, bc := range []struct {
		name  string
		e     *Enforcer
		rule  string
		creds *Credentials
		want  Decision
	}{
		{"blazar-lease-get-member", blazar, "blazar:leases:get", member, Allow},
		{"blazar-oshosts-get-member", blazar, "blazar:oshosts:get", member, Deny},
		{"placement-legacy-list-admin", placement, "placement:resource_providers:list", admin, Allow},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if bc.e.Enforce(bc.rule, bc.creds, target) != bc.want {
					b.Fatal("wrong decision")
				}
			}
		})
	}
}
