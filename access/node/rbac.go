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

// Ported from k8s.io/kubernetes plugin/pkg/auth/authorizer/rbac/rbac.go@v1.37.2.
// Changed: only RulesAllow and RuleAllows are ported, unexported as
// rulesAllow and ruleAllows; the logic is unchanged.

package node

import (
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// rulesAllow reports whether any of the rules allows the request.
func rulesAllow(requestAttributes authorizer.Attributes, rules ...rbacv1.PolicyRule) bool {
	for i := range rules {
		if ruleAllows(requestAttributes, &rules[i]) {
			return true
		}
	}

	return false
}

// ruleAllows reports whether the rule allows the request: its verb, and
// for a resource request its API group, resource ("resource/subresource"
// when there is a subresource) and name, or for a non-resource request
// its path.
func ruleAllows(requestAttributes authorizer.Attributes, rule *rbacv1.PolicyRule) bool {
	if requestAttributes.IsResourceRequest() {
		combinedResource := requestAttributes.GetResource()
		if len(requestAttributes.GetSubresource()) > 0 {
			combinedResource = requestAttributes.GetResource() + "/" + requestAttributes.GetSubresource()
		}

		return verbMatches(rule, requestAttributes.GetVerb()) &&
			apiGroupMatches(rule, requestAttributes.GetAPIGroup()) &&
			resourceMatches(rule, combinedResource, requestAttributes.GetSubresource()) &&
			resourceNameMatches(rule, requestAttributes.GetName())
	}

	return verbMatches(rule, requestAttributes.GetVerb()) &&
		nonResourceURLMatches(rule, requestAttributes.GetPath())
}
