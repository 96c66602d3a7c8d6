package policy

// OwnershipRules returns the rules of Leasehold's ownership extension
// (/v1/ownership): the plan and the computed ownership are the admin's;
// a project's readers read the pools their own project draws from and
// the loans it takes part in.
func OwnershipRules() []Rule {
	project := []string{"project"}
	v := func(path string) string { return "/{api_version}" + path }
	return []Rule{
		{Name: "leasehold:ownership:get", Check: "rule:admin",
			Description: "Read the ownership plan and the computed ownership (who owns which hosts, pools, what moved).",
			Operations:  []Operation{{"GET", v("/ownership")}, {"GET", v("/ownership/plan")}}, ScopeTypes: project},
		{Name: "leasehold:ownership:update", Check: "rule:admin",
			Description: "Change the ownership plan (consumers, resource groups, entries) or recompute the ownership.",
			Operations: []Operation{{"PUT", v("/ownership/plan")}, {"PUT", v("/ownership/consumers/{consumer_id}")},
				{"DELETE", v("/ownership/consumers/{consumer_id}")}, {"PUT", v("/ownership/groups/{group_name}")},
				{"DELETE", v("/ownership/groups/{group_name}")}, {"PUT", v("/ownership/consumers/{consumer_id}/groups/{group_name}")},
				{"DELETE", v("/ownership/consumers/{consumer_id}/groups/{group_name}")}, {"POST", v("/ownership/recompute")}},
			ScopeTypes: project},
		{Name: "leasehold:ownership:get_project", Check: "rule:project_reader_or_admin",
			Description: "Read which pools a project's requests draw from and why, and the loans over a window it takes part in (the project's own view).",
			Operations:  []Operation{{"GET", v("/ownership/projects/{project_id}")}, {"POST", v("/ownership/explain")}}, ScopeTypes: project},
	}
}
