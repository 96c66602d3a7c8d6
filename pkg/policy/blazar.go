package policy

// Blazar's documented defaults (blazar/policies/*.py): leases are the
// project's (readers read, members write) or the admin's; hosts and their
// allocations and properties are the admin's; floating IPs are read like
// leases and managed by the admin. Leasehold adds the scheduler filter
// endpoint, for the admin or a service user.

// blazarDeprecatedReason is upstream's reason for replacing
// admin_or_owner with the role-based rules.
const blazarDeprecatedReason = "Blazar API policies are introducing new default roles with scope_type " +
	"capabilities. Old policies are deprecated and silently going to be ignored in future release."

// blazarAdminOrOwner is the rule the project rules replaced. Upstream
// names it "rule:admin_or_owner", so a policy file's admin_or_owner
// entry does not carry over to the new rules.
var blazarAdminOrOwner = &Deprecated{
	Name:   "rule:admin_or_owner",
	Check:  "rule:admin or project_id:%(project_id)s",
	Reason: blazarDeprecatedReason,
	Since:  "15.0.0",
}

// BlazarDefaultRule is the rule Blazar decides an action with no rule of
// its own by (oslo.policy's policy_default_rule).
const BlazarDefaultRule = "default"

// BlazarImpliedRoles returns Keystone's default implied roles (admin
// implies member, member implies reader), applied to Blazar's callers
// whose token did not expand them.
func BlazarImpliedRoles() map[string][]string {
	return map[string][]string{"admin": {"member", "reader"}, "member": {"reader"}}
}

// BlazarRules returns Blazar's default rules, in upstream's order.
func BlazarRules() []Rule {
	project := []string{"project"}
	v := func(path string) string { return "/{api_version}" + path }
	return []Rule{
		{Name: "default", Check: "rule:admin",
			Description: "Rule for an action that has no rule of its own (oslo.policy's policy_default_rule)."},
		{Name: "admin", Check: "is_admin:True or role:admin",
			Description: "Default rule for most Admin APIs."},
		{Name: "admin_or_owner", Check: "rule:admin or project_id:%(project_id)s",
			Description:          "Default rule for most non-Admin APIs.",
			DeprecatedForRemoval: true, DeprecatedReason: blazarDeprecatedReason, DeprecatedSince: "15.0.0"},
		{Name: "project_member_api", Check: "role:member and project_id:%(project_id)s",
			Description: "Default rule for Project Member (non-Admin) APIs.", Deprecated: blazarAdminOrOwner},
		{Name: "project_reader_api", Check: "role:reader and project_id:%(project_id)s",
			Description: "Default rule for Project Reader (read-only) APIs.", Deprecated: blazarAdminOrOwner},
		{Name: "project_member_or_admin", Check: "rule:project_member_api or rule:admin",
			Description: "Default rule for Project Member or Admin APIs.", Deprecated: blazarAdminOrOwner},
		{Name: "project_reader_or_admin", Check: "rule:project_reader_api or rule:admin",
			Description: "Default rule for Project Reader or Admin APIs.", Deprecated: blazarAdminOrOwner},

		{Name: "blazar:leases:get", Check: "rule:project_reader_or_admin",
			Description: "Policy rule for List/Show Lease(s) API.",
			Operations:  []Operation{{"GET", v("/leases")}, {"GET", v("/leases/{lease_id}")}}, ScopeTypes: project},
		{Name: "blazar:leases:post", Check: "rule:project_member_or_admin",
			Description: "Policy rule for Create Lease API.",
			Operations:  []Operation{{"POST", v("/leases")}}, ScopeTypes: project},
		{Name: "blazar:leases:put", Check: "rule:project_member_or_admin",
			Description: "Policy rule for Update Lease API.",
			Operations:  []Operation{{"PUT", v("/leases/{lease_id}")}}, ScopeTypes: project},
		{Name: "blazar:leases:delete", Check: "rule:project_member_or_admin",
			Description: "Policy rule for Delete Lease API.",
			Operations:  []Operation{{"DELETE", v("/leases/{lease_id}")}}, ScopeTypes: project},

		{Name: "blazar:oshosts:get", Check: "rule:admin",
			Description: "Policy rule for List/Show Host(s) API.",
			Operations:  []Operation{{"GET", v("/os-hosts")}, {"GET", v("/os-hosts/{host_id}")}}, ScopeTypes: project},
		{Name: "blazar:oshosts:post", Check: "rule:admin",
			Description: "Policy rule for Create Host API.",
			Operations:  []Operation{{"POST", v("/os-hosts")}}, ScopeTypes: project},
		{Name: "blazar:oshosts:put", Check: "rule:admin",
			Description: "Policy rule for Update Host API.",
			Operations:  []Operation{{"PUT", v("/os-hosts/{host_id}")}}, ScopeTypes: project},
		{Name: "blazar:oshosts:delete", Check: "rule:admin",
			Description: "Policy rule for Delete Host API.",
			Operations:  []Operation{{"DELETE", v("/os-hosts/{host_id}")}}, ScopeTypes: project},
		{Name: "blazar:oshosts:get_allocations", Check: "rule:admin",
			Description: "Policy rule for List/Get Host(s) Allocations API.",
			Operations:  []Operation{{"GET", v("/os-hosts/allocations")}, {"GET", v("/os-hosts/{host_id}/allocation")}}, ScopeTypes: project},
		{Name: "blazar:oshosts:get_resource_properties", Check: "rule:admin",
			Description: "Policy rule for Resource Properties API.",
			Operations:  []Operation{{"GET", v("/os-hosts/resource_properties")}}, ScopeTypes: project},
		{Name: "blazar:oshosts:update_resource_properties", Check: "rule:admin",
			Description: "Policy rule for Resource Properties API.",
			Operations:  []Operation{{"PATCH", v("/os-hosts/resource_properties/{property_name}")}}, ScopeTypes: project},

		{Name: "blazar:floatingips:get", Check: "rule:project_reader_or_admin",
			Description: "Policy rule for List/Show FloatingIP(s) API.",
			Operations:  []Operation{{"GET", v("/floatingips")}, {"GET", v("/floatingips/{floatingip_id}")}}, ScopeTypes: project},
		{Name: "blazar:floatingips:post", Check: "rule:admin",
			Description: "Policy rule for Create Floating IP API.",
			Operations:  []Operation{{"POST", v("/floatingips")}}, ScopeTypes: project},
		{Name: "blazar:floatingips:delete", Check: "rule:admin",
			Description: "Policy rule for Delete Floating IP API.",
			Operations:  []Operation{{"DELETE", v("/floatingips/{floatingip_id}")}}, ScopeTypes: project},

		// Leasehold's own: the endpoint Nova's LeaseholdFilter calls with
		// the scheduler's service credentials.
		{Name: "leasehold:scheduler:filter", Check: "rule:admin or role:service",
			Description: "Ask which candidate hosts may take an instance now (Nova's LeaseholdFilter; a service user or the admin).",
			Operations:  []Operation{{"POST", v("/scheduler/filter")}}, ScopeTypes: project},
	}
}
