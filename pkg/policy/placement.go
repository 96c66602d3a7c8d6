package policy

// Placement's documented defaults as of Placement 8.0.0 (microversion
// 1.39; placement/policies/*.py): the secure-RBAC defaults (system admin
// writes, system reader reads, project readers see their own usages),
// each base rule carrying the legacy "role:admin" as its deprecated rule.

// placementDeprecatedReason is upstream's reason for the move to the
// secure-RBAC defaults.
const placementDeprecatedReason = "Placement API policies are introducing new default roles with scope_type " +
	"capabilities. Old policies are deprecated and silently going to be ignored in the placement 6.0.0 (Xena) release."

// placementAdminAPI is the legacy rule the base rules replaced. Upstream
// names it "rule:admin_api".
var placementAdminAPI = &Deprecated{
	Name:   "rule:admin_api",
	Check:  "role:admin",
	Reason: placementDeprecatedReason,
	Since:  "W",
}

// PlacementRules returns Placement's default rules, in upstream's order.
func PlacementRules() []Rule {
	system := []string{"system"}
	const (
		systemAdmin  = "rule:system_admin_api"
		systemReader = "rule:system_reader_api"
	)
	doc := func(name, check, desc string, ops ...Operation) Rule {
		return Rule{Name: name, Check: check, Description: desc, Operations: ops, ScopeTypes: system}
	}
	const (
		rp   = "/resource_providers/{uuid}"
		inv  = rp + "/inventories"
		invc = inv + "/{resource_class}"
	)
	usages := doc("placement:usages", "rule:system_or_project_reader",
		"List total resource usages for a given project.", Operation{"GET", "/usages"})
	usages.ScopeTypes = []string{"system", "project"}
	return []Rule{
		{Name: "admin_api", Check: "role:admin", Description: "Default rule for most placement APIs.",
			ScopeTypes: system, DeprecatedForRemoval: true, DeprecatedReason: placementDeprecatedReason, DeprecatedSince: "W"},
		{Name: "system_admin_api", Check: "role:admin and system_scope:all",
			Description: "Default rule for System Admin APIs.", Deprecated: placementAdminAPI},
		{Name: "system_reader_api", Check: "role:reader and system_scope:all",
			Description: "Default rule for System level read only APIs.", Deprecated: placementAdminAPI},
		{Name: "project_reader_api", Check: "role:reader and project_id:%(project_id)s",
			Description: "Default rule for Project level read only APIs.", Deprecated: placementAdminAPI},
		{Name: "system_or_project_reader", Check: "rule:system_reader_api or rule:project_reader_api",
			Description: "Default rule for System+Project read only APIs.", Deprecated: placementAdminAPI},

		doc("placement:resource_providers:aggregates:list", systemReader, "List resource provider aggregates.", Operation{"GET", rp + "/aggregates"}),
		doc("placement:resource_providers:aggregates:update", systemAdmin, "Update resource provider aggregates.", Operation{"PUT", rp + "/aggregates"}),

		doc("placement:allocations:manage", systemAdmin, "Manage allocations.", Operation{"POST", "/allocations"}),
		doc("placement:allocations:list", systemReader, "List allocations.", Operation{"GET", "/allocations/{consumer_uuid}"}),
		doc("placement:allocations:update", systemAdmin, "Update allocations.", Operation{"PUT", "/allocations/{consumer_uuid}"}),
		doc("placement:allocations:delete", systemAdmin, "Delete allocations.", Operation{"DELETE", "/allocations/{consumer_uuid}"}),
		doc("placement:resource_providers:allocations:list", systemReader, "List resource provider allocations.", Operation{"GET", rp + "/allocations"}),

		doc("placement:allocation_candidates:list", systemReader, "List allocation candidates.", Operation{"GET", "/allocation_candidates"}),

		doc("placement:resource_providers:inventories:list", systemReader, "List resource provider inventories.", Operation{"GET", inv}),
		doc("placement:resource_providers:inventories:create", systemAdmin, "Create one resource provider inventory.", Operation{"POST", inv}),
		doc("placement:resource_providers:inventories:show", systemReader, "Show resource provider inventory.", Operation{"GET", invc}),
		doc("placement:resource_providers:inventories:update", systemAdmin, "Update resource provider inventory.", Operation{"PUT", inv}, Operation{"PUT", invc}),
		doc("placement:resource_providers:inventories:delete", systemAdmin, "Delete resource provider inventory.", Operation{"DELETE", inv}, Operation{"DELETE", invc}),

		doc("placement:reshaper:reshape", systemAdmin, "Reshape Inventory and Allocations.", Operation{"POST", "/reshaper"}),

		doc("placement:resource_classes:list", systemReader, "List resource classes.", Operation{"GET", "/resource_classes"}),
		doc("placement:resource_classes:create", systemAdmin, "Create resource class.", Operation{"POST", "/resource_classes"}),
		doc("placement:resource_classes:show", systemReader, "Show resource class.", Operation{"GET", "/resource_classes/{name}"}),
		doc("placement:resource_classes:update", systemAdmin, "Update resource class.", Operation{"PUT", "/resource_classes/{name}"}),
		doc("placement:resource_classes:delete", systemAdmin, "Delete resource class.", Operation{"DELETE", "/resource_classes/{name}"}),

		doc("placement:resource_providers:list", systemReader, "List resource providers.", Operation{"GET", "/resource_providers"}),
		doc("placement:resource_providers:create", systemAdmin, "Create resource provider.", Operation{"POST", "/resource_providers"}),
		doc("placement:resource_providers:show", systemReader, "Show resource provider.", Operation{"GET", rp}),
		doc("placement:resource_providers:update", systemAdmin, "Update resource provider.", Operation{"PUT", rp}),
		doc("placement:resource_providers:delete", systemAdmin, "Delete resource provider.", Operation{"DELETE", rp}),

		doc("placement:traits:list", systemReader, "List traits.", Operation{"GET", "/traits"}),
		doc("placement:traits:show", systemReader, "Show trait.", Operation{"GET", "/traits/{name}"}),
		doc("placement:traits:update", systemAdmin, "Update trait.", Operation{"PUT", "/traits/{name}"}),
		doc("placement:traits:delete", systemAdmin, "Delete trait.", Operation{"DELETE", "/traits/{name}"}),
		doc("placement:resource_providers:traits:list", systemReader, "List resource provider traits.", Operation{"GET", rp + "/traits"}),
		doc("placement:resource_providers:traits:update", systemAdmin, "Update resource provider traits.", Operation{"PUT", rp + "/traits"}),
		doc("placement:resource_providers:traits:delete", systemAdmin, "Delete resource provider traits.", Operation{"DELETE", rp + "/traits"}),

		doc("placement:resource_providers:usages", systemReader, "List resource provider usages.", Operation{"GET", rp + "/usages"}),
		usages,
	}
}
