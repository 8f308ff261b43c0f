/*
Copyright 2016 The Kubernetes Authors.

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

// Ported from k8s.io/kubernetes plugin/pkg/auth/authorizer/rbac/rbac_test.go@v1.37.2.
// Changed: only TestRuleMatches and its request builder are ported; they
// use newRule and ruleAllows. The cases "resource names" and "star
// subresource" at the end of the table, and TestRulesAllow, are kubestore's.

package node

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

func TestRuleMatches(t *testing.T) {
	type requestToTest struct {
		request  authorizer.AttributesRecord
		expected bool
	}
	tests := []struct {
		name string
		rule rbacv1.PolicyRule

		requestsToExpected []*requestToTest
	}{
		{
			name: "star verb, exact match other",
			rule: newRule("*").Groups("group1").Resources("resource1").RuleOrDie(),
			requestsToExpected: []*requestToTest{
				{resourceRequest("verb1").Group("group1").Resource("resource1").New(), true},
				{resourceRequest("verb1").Group("group2").Resource("resource1").New(), false},
				{resourceRequest("verb1").Group("group1").Resource("resource2").New(), false},
				{resourceRequest("verb1").Group("group2").Resource("resource2").New(), false},
				{resourceRequest("verb2").Group("group1").Resource("resource1").New(), true},
				{resourceRequest("verb2").Group("group2").Resource("resource1").New(), false},
				{resourceRequest("verb2").Group("group1").Resource("resource2").New(), false},
				{resourceRequest("verb2").Group("group2").Resource("resource2").New(), false},
			},
		},
		{
			name: "star group, exact match other",
			rule: newRule("verb1").Groups("*").Resources("resource1").RuleOrDie(),
			requestsToExpected: []*requestToTest{
				{resourceRequest("verb1").Group("group1").Resource("resource1").New(), true},
				{resourceRequest("verb1").Group("group2").Resource("resource1").New(), true},
				{resourceRequest("verb1").Group("group1").Resource("resource2").New(), false},
				{resourceRequest("verb1").Group("group2").Resource("resource2").New(), false},
				{resourceRequest("verb2").Group("group1").Resource("resource1").New(), false},
				{resourceRequest("verb2").Group("group2").Resource("resource1").New(), false},
				{resourceRequest("verb2").Group("group1").Resource("resource2").New(), false},
				{resourceRequest("verb2").Group("group2").Resource("resource2").New(), false},
			},
		},
		{
			name: "star resource, exact match other",
			rule: newRule("verb1").Groups("group1").Resources("*").RuleOrDie(),
			requestsToExpected: []*requestToTest{
				{resourceRequest("verb1").Group("group1").Resource("resource1").New(), true},
				{resourceRequest("verb1").Group("group2").Resource("resource1").New(), false},
				{resourceRequest("verb1").Group("group1").Resource("resource2").New(), true},
				{resourceRequest("verb1").Group("group2").Resource("resource2").New(), false},
				{resourceRequest("verb2").Group("group1").Resource("resource1").New(), false},
				{resourceRequest("verb2").Group("group2").Resource("resource1").New(), false},
				{resourceRequest("verb2").Group("group1").Resource("resource2").New(), false},
				{resourceRequest("verb2").Group("group2").Resource("resource2").New(), false},
			},
		},
		{
			name: "tuple expansion",
			rule: newRule("verb1", "verb2").Groups("group1", "group2").Resources("resource1", "resource2").RuleOrDie(),
			requestsToExpected: []*requestToTest{
				{resourceRequest("verb1").Group("group1").Resource("resource1").New(), true},
				{resourceRequest("verb1").Group("group2").Resource("resource1").New(), true},
				{resourceRequest("verb1").Group("group1").Resource("resource2").New(), true},
				{resourceRequest("verb1").Group("group2").Resource("resource2").New(), true},
				{resourceRequest("verb2").Group("group1").Resource("resource1").New(), true},
				{resourceRequest("verb2").Group("group2").Resource("resource1").New(), true},
				{resourceRequest("verb2").Group("group1").Resource("resource2").New(), true},
				{resourceRequest("verb2").Group("group2").Resource("resource2").New(), true},
			},
		},
		{
			name: "subresource expansion",
			rule: newRule("*").Groups("*").Resources("resource1/subresource1").RuleOrDie(),
			requestsToExpected: []*requestToTest{
				{resourceRequest("verb1").Group("group1").Resource("resource1").Subresource("subresource1").New(), true},
				{resourceRequest("verb1").Group("group2").Resource("resource1").Subresource("subresource2").New(), false},
				{resourceRequest("verb1").Group("group1").Resource("resource2").Subresource("subresource1").New(), false},
				{resourceRequest("verb1").Group("group2").Resource("resource2").Subresource("subresource1").New(), false},
				{resourceRequest("verb2").Group("group1").Resource("resource1").Subresource("subresource1").New(), true},
				{resourceRequest("verb2").Group("group2").Resource("resource1").Subresource("subresource2").New(), false},
				{resourceRequest("verb2").Group("group1").Resource("resource2").Subresource("subresource1").New(), false},
				{resourceRequest("verb2").Group("group2").Resource("resource2").Subresource("subresource1").New(), false},
			},
		},
		{
			name: "star nonresource, exact match other",
			rule: newRule("verb1").URLs("*").RuleOrDie(),
			requestsToExpected: []*requestToTest{
				{nonresourceRequest("verb1").URL("/foo").New(), true},
				{nonresourceRequest("verb1").URL("/foo/bar").New(), true},
				{nonresourceRequest("verb1").URL("/foo/baz").New(), true},
				{nonresourceRequest("verb1").URL("/foo/bar/one").New(), true},
				{nonresourceRequest("verb1").URL("/foo/baz/one").New(), true},
				{nonresourceRequest("verb2").URL("/foo").New(), false},
				{nonresourceRequest("verb2").URL("/foo/bar").New(), false},
				{nonresourceRequest("verb2").URL("/foo/baz").New(), false},
				{nonresourceRequest("verb2").URL("/foo/bar/one").New(), false},
				{nonresourceRequest("verb2").URL("/foo/baz/one").New(), false},
			},
		},
		{
			name: "star nonresource subpath",
			rule: newRule("verb1").URLs("/foo/*").RuleOrDie(),
			requestsToExpected: []*requestToTest{
				{nonresourceRequest("verb1").URL("/foo").New(), false},
				{nonresourceRequest("verb1").URL("/foo/bar").New(), true},
				{nonresourceRequest("verb1").URL("/foo/baz").New(), true},
				{nonresourceRequest("verb1").URL("/foo/bar/one").New(), true},
				{nonresourceRequest("verb1").URL("/foo/baz/one").New(), true},
				{nonresourceRequest("verb1").URL("/notfoo").New(), false},
				{nonresourceRequest("verb1").URL("/notfoo/bar").New(), false},
				{nonresourceRequest("verb1").URL("/notfoo/baz").New(), false},
				{nonresourceRequest("verb1").URL("/notfoo/bar/one").New(), false},
				{nonresourceRequest("verb1").URL("/notfoo/baz/one").New(), false},
			},
		},
		{
			name: "star verb, exact nonresource",
			rule: newRule("*").URLs("/foo", "/foo/bar/one").RuleOrDie(),
			requestsToExpected: []*requestToTest{
				{nonresourceRequest("verb1").URL("/foo").New(), true},
				{nonresourceRequest("verb1").URL("/foo/bar").New(), false},
				{nonresourceRequest("verb1").URL("/foo/baz").New(), false},
				{nonresourceRequest("verb1").URL("/foo/bar/one").New(), true},
				{nonresourceRequest("verb1").URL("/foo/baz/one").New(), false},
				{nonresourceRequest("verb2").URL("/foo").New(), true},
				{nonresourceRequest("verb2").URL("/foo/bar").New(), false},
				{nonresourceRequest("verb2").URL("/foo/baz").New(), false},
				{nonresourceRequest("verb2").URL("/foo/bar/one").New(), true},
				{nonresourceRequest("verb2").URL("/foo/baz/one").New(), false},
			},
		},
		{
			name: "resource names",
			rule: rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"cm1", "cm2"}},
			requestsToExpected: []*requestToTest{
				{resourceRequest("get").Group("").Resource("configmaps").Name("cm1").New(), true},
				{resourceRequest("get").Group("").Resource("configmaps").Name("cm2").New(), true},
				{resourceRequest("get").Group("").Resource("configmaps").Name("cm3").New(), false},
				{resourceRequest("get").Group("").Resource("configmaps").New(), false},
				{resourceRequest("list").Group("").Resource("configmaps").Name("cm1").New(), false},
			},
		},
		{
			name: "star subresource",
			rule: newRule("update").Groups("*").Resources("*/status").RuleOrDie(),
			requestsToExpected: []*requestToTest{
				{resourceRequest("update").Group("").Resource("pods").Subresource("status").New(), true},
				{resourceRequest("update").Group("apps").Resource("deployments").Subresource("status").New(), true},
				{resourceRequest("update").Group("").Resource("pods").New(), false},
				{resourceRequest("update").Group("").Resource("pods").Subresource("eviction").New(), false},
				{resourceRequest("update").Group("").Resource("pods").Subresource("xstatus").New(), false},
			},
		},
	}
	for _, tc := range tests {
		for _, requestToTest := range tc.requestsToExpected {
			if e, a := requestToTest.expected, ruleAllows(requestToTest.request, &tc.rule); e != a {
				t.Errorf("%q: expected %v, got %v for %v", tc.name, e, a, requestToTest.request)
			}
		}
	}
}

type requestAttributeBuilder struct {
	request authorizer.AttributesRecord
}

func resourceRequest(verb string) *requestAttributeBuilder {
	return &requestAttributeBuilder{
		request: authorizer.AttributesRecord{ResourceRequest: true, Verb: verb},
	}
}

func nonresourceRequest(verb string) *requestAttributeBuilder {
	return &requestAttributeBuilder{
		request: authorizer.AttributesRecord{ResourceRequest: false, Verb: verb},
	}
}

func (r *requestAttributeBuilder) Group(group string) *requestAttributeBuilder {
	r.request.APIGroup = group
	return r
}

func (r *requestAttributeBuilder) Resource(resource string) *requestAttributeBuilder {
	r.request.Resource = resource
	return r
}

func (r *requestAttributeBuilder) Subresource(subresource string) *requestAttributeBuilder {
	r.request.Subresource = subresource
	return r
}

func (r *requestAttributeBuilder) Name(name string) *requestAttributeBuilder {
	r.request.Name = name
	return r
}

func (r *requestAttributeBuilder) URL(url string) *requestAttributeBuilder {
	r.request.Path = url
	return r
}

func (r *requestAttributeBuilder) New() authorizer.AttributesRecord {
	return r.request
}

// TestRulesAllow checks that rulesAllow allows a request as soon as one rule
// allows it, and that no rules allow nothing.
func TestRulesAllow(t *testing.T) {
	rules := []rbacv1.PolicyRule{
		newRule("get").Groups("").Resources("secrets").RuleOrDie(),
		newRule("get").URLs("/healthz").RuleOrDie(),
	}
	for _, tc := range []struct {
		request  authorizer.AttributesRecord
		rules    []rbacv1.PolicyRule
		expected bool
	}{
		{resourceRequest("get").Group("").Resource("secrets").New(), rules, true},
		{resourceRequest("list").Group("").Resource("secrets").New(), rules, false},
		{nonresourceRequest("get").URL("/healthz").New(), rules, true},
		{nonresourceRequest("get").URL("/readyz").New(), rules, false},
		{resourceRequest("get").Group("").Resource("secrets").New(), nil, false},
	} {
		if got := rulesAllow(tc.request, tc.rules...); got != tc.expected {
			t.Errorf("rulesAllow(%v) = %v, want %v", tc.request, got, tc.expected)
		}
	}
}
