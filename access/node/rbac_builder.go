/*
Copyright 2017 The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Ported from k8s.io/kubernetes pkg/apis/rbac/v1/helpers.go@v1.37.2.
// Changed: only PolicyRuleBuilder is ported, unexported as
// policyRuleBuilder (with newRule) and without the Names method, which
// NodeRules does not use; sets.NewString is replaced by sets.New[string] and
// sets.List. The logic is unchanged.

package node

import (
	"fmt"
	"sort"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// policyRuleBuilder let's us attach methods.  A no-no for API types.
// We use it to construct rules in code.  It's more compact than trying to write them
// out in a literal and allows us to perform some basic checking during construction
type policyRuleBuilder struct {
	PolicyRule rbacv1.PolicyRule
}

// newRule starts a rule allowing the verbs, deduplicated and sorted.
func newRule(verbs ...string) *policyRuleBuilder {
	return &policyRuleBuilder{
		PolicyRule: rbacv1.PolicyRule{Verbs: sets.List(sets.New(verbs...))},
	}
}

// Groups adds API groups to the rule.
func (r *policyRuleBuilder) Groups(groups ...string) *policyRuleBuilder {
	r.PolicyRule.APIGroups = combine(r.PolicyRule.APIGroups, groups)
	return r
}

// Resources adds resources ("resource" or "resource/subresource") to the
// rule.
func (r *policyRuleBuilder) Resources(resources ...string) *policyRuleBuilder {
	r.PolicyRule.Resources = combine(r.PolicyRule.Resources, resources)
	return r
}

// URLs adds non-resource URLs to the rule.
func (r *policyRuleBuilder) URLs(urls ...string) *policyRuleBuilder {
	r.PolicyRule.NonResourceURLs = combine(r.PolicyRule.NonResourceURLs, urls)
	return r
}

// combine returns the sorted union of s1 and s2.
func combine(s1, s2 []string) []string {
	s := sets.New(s1...)
	s.Insert(s2...)
	return sets.List(s)
}

// RuleOrDie returns the rule, and panics where Rule returns an error.
func (r *policyRuleBuilder) RuleOrDie() rbacv1.PolicyRule {
	ret, err := r.Rule()
	if err != nil {
		panic(err)
	}
	return ret
}

// Rule returns the rule with its lists sorted, or an error for a rule
// without verbs, with neither resources nor non-resource URLs, mixing the
// two, or with resources but no API groups.
func (r *policyRuleBuilder) Rule() (rbacv1.PolicyRule, error) {
	if len(r.PolicyRule.Verbs) == 0 {
		return rbacv1.PolicyRule{}, fmt.Errorf("verbs are required: %#v", r.PolicyRule)
	}

	switch {
	case len(r.PolicyRule.NonResourceURLs) > 0:
		if len(r.PolicyRule.APIGroups) != 0 || len(r.PolicyRule.Resources) != 0 || len(r.PolicyRule.ResourceNames) != 0 {
			return rbacv1.PolicyRule{}, fmt.Errorf("non-resource rule may not have apiGroups, resources, or resourceNames: %#v", r.PolicyRule)
		}
	case len(r.PolicyRule.Resources) > 0:
		if len(r.PolicyRule.NonResourceURLs) != 0 {
			return rbacv1.PolicyRule{}, fmt.Errorf("resource rule may not have nonResourceURLs: %#v", r.PolicyRule)
		}
		if len(r.PolicyRule.APIGroups) == 0 {
			// this a common bug
			return rbacv1.PolicyRule{}, fmt.Errorf("resource rule must have apiGroups: %#v", r.PolicyRule)
		}
	default:
		return rbacv1.PolicyRule{}, fmt.Errorf("a rule must have either nonResourceURLs or resources: %#v", r.PolicyRule)
	}

	sort.Strings(r.PolicyRule.Resources)
	sort.Strings(r.PolicyRule.ResourceNames)
	sort.Strings(r.PolicyRule.APIGroups)
	sort.Strings(r.PolicyRule.NonResourceURLs)
	sort.Strings(r.PolicyRule.Verbs)
	return r.PolicyRule, nil
}
