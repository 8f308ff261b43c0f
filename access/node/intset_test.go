/*
Copyright 2018 The Kubernetes Authors.

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

// Ported from k8s.io/kubernetes plugin/pkg/auth/authorizer/node/intset_test.go@v1.37.2.
// Changed: testify's assert.True/False are replaced by a local helper.

package node

import (
	"testing"
)

func TestIntSet(t *testing.T) {
	i := newIntSet()

	expect := func(id int, want bool) {
		t.Helper()
		if got := i.has(id); got != want {
			t.Errorf("has(%d) = %v, want %v", id, got, want)
		}
	}

	expect(1, false)
	expect(2, false)
	expect(3, false)
	expect(4, false)

	i.reset()
	i.increment(1) // to 1
	i.increment(2) // to 1

	expect(1, true)
	expect(2, true)
	expect(3, false)
	expect(4, false)

	i.decrement(1) // to 0
	i.increment(3) // to 1

	expect(1, false) // removed
	expect(2, true)  // still present
	expect(3, true)  // added
	expect(4, false) // not yet present

	i.decrement(2) // to 0
	i.increment(3) // to 2
	i.decrement(3) // to 1
	i.increment(4) // to 1

	expect(1, false)
	expect(2, false)
	expect(3, true)
	expect(4, true)

	i.reset()
	expect(1, false)
	expect(2, false)
	expect(3, false)
	expect(4, false)

	// kubestore: a nil set has nothing
	var nilSet *intSet
	if nilSet.has(1) {
		t.Error("nil set has(1) = true")
	}
}
